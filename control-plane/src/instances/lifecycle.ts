// The instance state machine as one table over the spec's statuses, and the table of what
// the service does when something happens to an instance (`decide`). `transition` is the
// only way a status changes; the service carries out what `decide` returns and nothing
// else: status changes, stops to (re-)send, starts to re-order.
import { ALIVE_TASK_STATES, type AgentTaskState } from './task-dispatch.js';

export const INSTANCE_STATUSES = ['provisioning', 'starting', 'ready', 'draining', 'terminated', 'failed'] as const;
export type InstanceStatus = (typeof INSTANCE_STATUSES)[number];

export type LifecycleEvent =
  /** The agent began pulling the image or creating the container. */
  | 'start'
  /** The container runs: SSH and Jupyter go live, billing starts. */
  | 'running'
  /** A stop was requested (user terminate, reservation expiry): SIGTERM, grace, SIGKILL. */
  | 'terminate'
  /** The container is gone (stopped, killed, or exited by itself). */
  | 'stopped'
  /** Provisioning or start failed: pull error, create error, node lost before ready (silent past the deadline). */
  | 'fail';

export const TERMINAL: ReadonlySet<InstanceStatus> = new Set(['terminated', 'failed']);
/** Statuses of an instance that is ending or ended: a reservation in one is not extended. */
export const ENDING_STATUSES: readonly InstanceStatus[] = ['draining', ...TERMINAL];

const TABLE: Record<InstanceStatus, Partial<Record<LifecycleEvent, InstanceStatus>>> = {
  provisioning: { start: 'starting', running: 'ready', terminate: 'draining', stopped: 'terminated', fail: 'failed' },
  starting: { running: 'ready', terminate: 'draining', stopped: 'terminated', fail: 'failed' },
  ready: { terminate: 'draining', stopped: 'terminated' },
  draining: { stopped: 'terminated' },
  terminated: {},
  failed: {},
};

export type Transition = { ok: true; from: InstanceStatus; to: InstanceStatus } | { ok: false; from: InstanceStatus; reason: string };

export function transition(from: InstanceStatus, event: LifecycleEvent): Transition {
  const to = TABLE[from][event];
  if (to === undefined) return { ok: false, from, reason: `an instance that is ${from} cannot take "${event}"` };
  return { ok: true, from, to };
}

/** Billing runs while the instance is ready or draining (spec section 3 and 8). */
export const isBillable = (status: InstanceStatus): boolean => status === 'ready' || status === 'draining';

/** Everything that can happen to an instance, as the service hears of it. */
export type Occurrence =
  /** A task state its node reported on a live session. */
  | { kind: 'report'; state: AgentTaskState }
  /** Its node opened a session (Hello); `running`: the node runs the instance's container. */
  | { kind: 'hello'; running: boolean }
  /** A user or operator asks for a stop; `force` skips (or cuts short) the grace. */
  | { kind: 'terminate'; force: boolean }
  /** Its reservation reached expires_at (or, while draining, the stop is overdue). */
  | { kind: 'expire' }
  /** Its node went silent. */
  | { kind: 'node_lost' }
  /** An operator settled its lost node (`svcctl nodes forget`). */
  | { kind: 'forget' }
  /**
   * The start order could not be sent right after create: the node has no live session
   * here (its agent is reconnecting, or this control plane just restarted).
   */
  | { kind: 'undeliverable' };

/**
 * What to ask of the node about the container:
 * - `graceful`: record a graceful stop (SIGTERM, grace, SIGKILL) and send it;
 * - `force`: record a forced stop (SIGKILL now) and send it, escalating one in flight;
 * - `resend`: send the recorded stop again, with what is left of its grace (the node may
 *   have lost it: agent restart, stream cut after the command was queued).
 */
export type StopAction = 'graceful' | 'force' | 'resend';

export interface Decision {
  /** The lifecycle event to apply (with its event, charge or refund), if any. */
  event: LifecycleEvent | null;
  stop: StopAction | null;
  /** Order the start again (the agent restarted mid-start; starts are idempotent there). */
  restart: boolean;
  /** Record the reported pull progress. */
  progress: boolean;
  /** Refresh the SSH/Jupyter endpoints the node reported. */
  access: boolean;
  /**
   * Kill the container on its node at once, nothing recorded: the instance ended here
   * (failed, terminated) yet its node reports its container alive, or it fails now while
   * its container is still being made. Its GPUs are free again for others, so a container
   * left running would share them with the next tenant.
   */
  kill: boolean;
}

const NOTHING: Decision = { event: null, stop: null, restart: false, progress: false, access: false, kill: false };

const act = (d: Partial<Decision>): Decision => ({ ...NOTHING, ...d });

type Early = 'provisioning' | 'starting';
const isEarly = (s: InstanceStatus): s is Early => s === 'provisioning' || s === 'starting';

/**
 * The one place that decides what happens to an instance. Terminal instances take nothing,
 * except that a container the node still reports alive is killed (an instance failed as
 * "node lost before ready" whose node turned out to be running it). A draining instance
 * keeps hearing its stop until the node reports the container gone: on every Hello that
 * still lists it, on a `running` report, on a repeated terminate and when its stop is overdue.
 */
export function decide(status: InstanceStatus, happened: Occurrence): Decision {
  if (TERMINAL.has(status)) {
    const alive = (happened.kind === 'report' && ALIVE_TASK_STATES.has(happened.state)) || (happened.kind === 'hello' && happened.running);
    return alive ? act({ kill: true }) : NOTHING;
  }
  switch (happened.kind) {
    case 'report':
      return onReport(status, happened.state);
    case 'hello':
      if (happened.running) {
        if (isEarly(status)) return act({ event: 'running', access: true });
        return status === 'ready' ? act({ access: true }) : act({ stop: 'resend' });
      }
      if (isEarly(status)) return act({ restart: true });
      // Ready but no longer running: the container ended while the node was away. Ask the
      // node to confirm (a stop of a missing container answers `gone`), so a report of
      // when it really stopped, queued on the node, settles the bill first.
      return status === 'ready' ? act({ event: 'terminate', stop: 'force' }) : act({ stop: 'resend' });
    case 'terminate':
      if (status === 'draining') return act({ stop: happened.force ? 'force' : 'resend' });
      // Never ready, nothing of the tenant's runs to shut down gracefully (nor is any of it
      // billed): its start is called off and whatever it made is killed at once.
      return act({ event: 'terminate', stop: happened.force || isEarly(status) ? 'force' : 'graceful' });
    case 'expire':
      // A reservation that ends before it was ever ready (its image still pulling) gave its
      // owner nothing: it fails, refunded as any failed provision, and the pull is stopped.
      if (isEarly(status)) return act({ event: 'fail', kill: true });
      return status === 'draining' ? act({ stop: 'resend' }) : act({ event: 'terminate', stop: 'graceful' });
    case 'node_lost':
      // Ready instances wait for the node (or an operator's forget): billing follows the stop.
      return isEarly(status) ? act({ event: 'fail' }) : NOTHING;
    case 'forget':
      return act({ event: isEarly(status) ? 'fail' : 'stopped' });
    case 'undeliverable':
      // Wait for the node: its Hello re-orders the start (`restart` above), and a node
      // that stays away past the deadline fails it (`node_lost`). Failing at once turned a
      // control-plane restart into a burst of 201s followed by instant failures.
      return NOTHING;
  }
}

function onReport(status: InstanceStatus, state: AgentTaskState): Decision {
  switch (state) {
    case 'pulling':
    case 'starting':
      if (status === 'provisioning') return act({ event: 'start', progress: true });
      return status === 'starting' ? act({ progress: true }) : NOTHING;
    case 'running':
      if (isEarly(status)) return act({ event: 'running', access: true });
      // A draining instance that still runs lost its stop on the way: send it again.
      return status === 'ready' ? act({ access: true }) : act({ stop: 'resend' });
    case 'failed':
      return act({ event: isEarly(status) ? 'fail' : 'stopped' });
    case 'exited':
    case 'gone':
      return act({ event: 'stopped' });
    case 'stopping':
    case 'unhealthy':
    case 'restarting':
      return NOTHING;
  }
}
