// The instance state machine as one table over the spec's statuses. `transition` is the
// only way a status changes; callers persist the result and record an
// `instance.lifecycle` event with it.

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
  /** Provisioning or start failed: pull error, create error, no node, node lost before ready. */
  | 'fail';

export const TERMINAL: ReadonlySet<InstanceStatus> = new Set(['terminated', 'failed']);

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
