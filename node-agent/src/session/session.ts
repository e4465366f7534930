// One session on the Connect stream: Hello -> Welcome, then host facts once, telemetry and
// a heartbeat every report interval (the control plane decides it, in Welcome and later
// ReportInterval messages), health events the moment they happen, and a CommandResult for
// every command. It fails fast: any problem ends the session with an error, and the one
// reconnect loop (reconnect-loop.ts) decides what happens next.
import type { AgentMessage, AgentGatewayClient, ControlMessage__Output, HostFacts } from '@svc/proto';
import { PROTOCOL_VERSION } from '@svc/proto';
import type { Clock, Logger } from '@svc/shared';
import { handleCommand } from '../commands/command-handler.js';
import type { NodeIdentity } from '../identity/identity-store.js';
import type { GpuMonitor } from '../telemetry/gpu-monitor.js';
import type { HealthEventOutbox } from '../telemetry/health-outbox.js';
import type { AgentTasks } from '../tasks/agent-tasks.js';
import { ControlStream } from './control-stream.js';
import { isFinalStatus, SessionEndedError, SessionRefusedError } from './session-errors.js';

/** How long the control plane has to answer Hello with Welcome. */
export const WELCOME_TIMEOUT_MS = 10_000;
/** A report interval below this from the server is raised to it, so a bad value cannot spin the agent. */
export const MIN_REPORT_INTERVAL_MS = 100;
/** Used when the server leaves the interval unset (0), as proto3 would for an old server. */
export const DEFAULT_REPORT_INTERVAL_MS = 5_000;

/**
 * How long the agent waits for a heartbeat Ack before it gives the session up: a control
 * plane that is hung (but whose HTTP/2 layer still answers keepalive pings) would
 * otherwise hold the agent forever. Generous, so an overloaded control plane is not
 * answered with a reconnect storm.
 */
export function ackDeadlineMs(intervalMs: number): number {
  return 5 * intervalMs + 2_000;
}

/** The interval to report at, from what the control plane sent. */
export function reportIntervalFrom(serverMs: number): number {
  return serverMs > 0 ? Math.max(MIN_REPORT_INTERVAL_MS, serverMs) : DEFAULT_REPORT_INTERVAL_MS;
}

export interface SessionDeps {
  client: AgentGatewayClient;
  identity: NodeIdentity;
  hostname: string;
  pool: string;
  agentVersion: string;
  monitor: GpuMonitor;
  outbox: HealthEventOutbox;
  tasks: AgentTasks;
  collectHostFacts: () => Promise<HostFacts>;
  /** Subscribes to changes worth sending the host facts again for (disk pressure); returns the unsubscribe. */
  onHostFactsChange?: (listener: () => void) => () => void;
  clock: Clock;
  log: Logger;
}

export interface SessionHooks {
  /** Called once the control plane welcomed this agent. */
  onWelcome?: (welcome: { node_id: string; report_interval_ms: number }) => void;
}

/**
 * Runs one session until `signal` aborts (resolves, after closing the stream politely) or
 * the stream ends (rejects: SessionEndedError to retry, SessionRefusedError to stop).
 */
export async function runSession(deps: SessionDeps, signal: AbortSignal, hooks: SessionHooks = {}): Promise<void> {
  const { log } = deps;
  const inbox = new Inbox();
  const call = deps.client.Connect();
  const stream = new ControlStream(call, (message) => inbox.push(message));
  const aborted = abortPromise(signal);
  const onAbort = (): void => stream.close();
  signal.addEventListener('abort', onAbort, { once: true });
  let unsubscribeFacts: (() => void) | undefined;
  try {
    await deps.tasks.recover();
    await stream.send(helloMessage(deps));
    const first = await Promise.race([inbox.next(WELCOME_TIMEOUT_MS), stream.ended]);
    if (first instanceof SessionEndedError) throw refusalOrEnd(first);
    if (first === undefined) throw new SessionEndedError(`no Welcome within ${WELCOME_TIMEOUT_MS} ms`);
    if (first.body !== 'welcome' || !first.welcome) throw new SessionEndedError(`expected Welcome, got ${first.body ?? 'an empty message'}`);
    let intervalMs = reportIntervalFrom(first.welcome.report_interval_ms);
    log.info({ node_id: first.welcome.node_id, report_interval_ms: intervalMs }, 'connected to the control plane');
    hooks.onWelcome?.({ node_id: first.welcome.node_id, report_interval_ms: intervalMs });

    // Commands, task states and health events flow from the Welcome on: host facts take a
    // while to collect (Docker, systeminformation; seconds on a loaded host), and a stop
    // the control plane re-sends on reconnect must not wait for them.
    void deps.outbox.attach((event) => stream.send({ body: 'health_event', health_event: event }));
    void deps.tasks.outbox.attach((state) => stream.send({ body: 'task_state', task_state: state }));

    const reporter = new Reporter(stream, deps, () => intervalMs);
    inbox.onMessage = (message) => {
      switch (message.body) {
        case 'report_interval':
          intervalMs = reportIntervalFrom(message.report_interval?.interval_ms ?? 0);
          log.info({ report_interval_ms: intervalMs }, 'report interval changed by the control plane');
          reporter.reschedule();
          break;
        case 'command': {
          const command = message.command!;
          log.info({ command_id: command.command_id, command: command.body, task_id: command.start_task?.task_id ?? command.stop_task?.task_id }, 'command');
          const answer = handleCommand(command, {
            resetGpuHealth: (uuid) => deps.monitor.resetHealth(uuid),
            resetGpu: (uuid) => deps.monitor.resetGpu(uuid),
            startTask: (order) => deps.tasks.start(order),
            stopTask: (order) => deps.tasks.stop(order),
          });
          // A failed send means the stream ended; `stream.ended` reports that below.
          void Promise.resolve(answer)
            .then((result) => stream.send({ body: 'command_result', command_result: result }))
            .catch((err: unknown) => log.warn({ err, command_id: command.command_id }, 'command answer not sent'));
          break;
        }
        case 'ack':
          reporter.acked(message.ack?.heartbeat_seq ?? 0);
          break;
        default:
          log.warn({ body: message.body }, 'unexpected control message');
      }
    };
    inbox.drain();

    // Host facts once, then telemetry and heartbeats. A failure (e.g. NVML) comes back as
    // a value, so nothing rejects unwatched.
    const sendHostFacts = () => deps.collectHostFacts().then((facts) => stream.send({ body: 'host_facts', host_facts: facts }));
    const reporting = sendHostFacts()
      .then(() => {
        // Facts that change mid-session go out at once; a failed send ends with the session anyway.
        unsubscribeFacts = deps.onHostFactsChange?.(() => void sendHostFacts().catch(() => undefined));
        return reporter.run();
      })
      .then(
      () => undefined,
      (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
    );
    const outcome = await Promise.race([stream.ended, reporting, aborted.promise]);
    reporter.stop();
    if (outcome instanceof SessionEndedError) throw refusalOrEnd(outcome);
    if (outcome instanceof Error) throw outcome;
    if (outcome === undefined) throw new SessionEndedError('the report loop stopped');
  } finally {
    unsubscribeFacts?.();
    deps.outbox.detach();
    deps.tasks.outbox.detach();
    aborted.dispose();
    signal.removeEventListener('abort', onAbort);
    if (signal.aborted && !stream.isEnded) {
      stream.close();
      // Give the server a moment to end its side, then tear down.
      await Promise.race([stream.ended, delay(1_000)]);
    }
    stream.cancel('session over');
  }
}

function helloMessage(deps: SessionDeps): AgentMessage {
  return {
    body: 'hello',
    hello: {
      node_id: deps.identity.node_id,
      node_secret: deps.identity.node_secret,
      protocol_version: PROTOCOL_VERSION,
      agent_version: deps.agentVersion,
      hostname: deps.hostname,
      pool: deps.pool,
      running_tasks: deps.tasks.running(),
      sent_at_ms: deps.clock.now(),
    },
  };
}

/** UNAUTHENTICATED / FAILED_PRECONDITION on Connect: the control plane refuses this node. */
function refusalOrEnd(end: SessionEndedError): Error {
  return isFinalStatus(end.code) ? new SessionRefusedError(`the control plane refused this node: ${end.message}`, end.code) : end;
}

/** Telemetry + heartbeat, now and then every interval, never overlapping. */
class Reporter {
  private seq = 0;
  private stopped = false;
  private wake: (() => void) | undefined;
  /** Heartbeats sent and not acknowledged yet: seq -> sent at (insertion order = seq order). */
  private readonly unacked = new Map<number, number>();

  constructor(
    private readonly stream: ControlStream,
    private readonly deps: SessionDeps,
    private readonly intervalMs: () => number,
  ) {}

  /** An Ack covers its heartbeat and every earlier one. */
  acked(seq: number): void {
    for (const sent of this.unacked.keys()) if (sent <= seq) this.unacked.delete(sent);
  }

  async run(): Promise<void> {
    while (!this.stopped) {
      const oldest = this.unacked.values().next();
      const waitedMs = oldest.done ? 0 : this.deps.clock.now() - oldest.value;
      if (waitedMs > ackDeadlineMs(this.intervalMs())) {
        throw new SessionEndedError(`the control plane has not acknowledged a heartbeat sent ${waitedMs} ms ago`);
      }
      const telemetry = this.deps.monitor.sample();
      await this.stream.send({ body: 'telemetry', telemetry });
      const seq = ++this.seq;
      const sentAt = this.deps.clock.now();
      this.unacked.set(seq, sentAt);
      await this.stream.send({ body: 'heartbeat', heartbeat: { seq, sent_at_ms: sentAt } });
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.intervalMs());
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Starts the next wait over with the new interval (reports once now). */
  reschedule(): void {
    this.wake?.();
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
  }
}

/** Control messages, buffered until the session is ready to handle them. */
class Inbox {
  onMessage: ((message: ControlMessage__Output) => void) | undefined;
  private buffered: ControlMessage__Output[] = [];
  private waiter: ((message: ControlMessage__Output) => void) | undefined;

  push(message: ControlMessage__Output): void {
    if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter(message);
    } else if (this.onMessage && this.buffered.length === 0) {
      this.onMessage(message);
    } else {
      this.buffered.push(message);
    }
  }

  /** The next message, or undefined after `timeoutMs`. */
  next(timeoutMs: number): Promise<ControlMessage__Output | undefined> {
    const buffered = this.buffered.shift();
    if (buffered) return Promise.resolve(buffered);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve(undefined);
      }, timeoutMs);
      timer.unref();
      this.waiter = (message) => {
        clearTimeout(timer);
        resolve(message);
      };
    });
  }

  /** Hands what arrived meanwhile to onMessage, in order. */
  drain(): void {
    while (this.onMessage && this.buffered.length > 0) this.onMessage(this.buffered.shift()!);
  }
}

/** Settles when `signal` aborts; dispose() removes the listener (one per session, on a long-lived signal). */
function abortPromise(signal: AbortSignal): { promise: Promise<'aborted'>; dispose: () => void } {
  let listener: (() => void) | undefined;
  const promise = new Promise<'aborted'>((resolve) => {
    if (signal.aborted) return resolve('aborted');
    listener = () => resolve('aborted');
    signal.addEventListener('abort', listener, { once: true });
  });
  return { promise, dispose: () => listener && signal.removeEventListener('abort', listener) };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
