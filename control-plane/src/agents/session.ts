// One agent's Connect stream, from Hello to the end. The first message must be Hello with
// a valid node identity and a supported protocol version; then the session answers
// Welcome (with the report interval the server decides), acks heartbeats, hands
// telemetry, host facts, health events and command results to the registry, and carries
// commands to the agent. Every ending goes through end() or gone(), once: after either,
// nothing is written.
import type * as grpc from '@grpc/grpc-js';
import { PROTOCOL_VERSION, type AgentMessage__Output, type Command, type CommandResult__Output, type ControlMessage, type Hello__Output, type HostFacts__Output, type TaskState__Output } from '@svc/proto';
import { checkProtocolVersion, type EnrollmentService } from '../nodes/enrollment-service.js';
import type { NodeRegistry, RegistryLogger } from '../nodes/node-registry.js';
import { NodeRefusal } from '../nodes/refusal.js';
import { peerHost } from './peer-host.js';
import { GATEWAY_STATUS_CODES, refusalStatus, type StatusMeaning } from './status-codes.js';
import { StreamWriter } from './stream-writer.js';

export type ConnectCall = grpc.ServerDuplexStream<AgentMessage__Output, ControlMessage>;

/** What a session needs from the gateway that holds it. */
export interface SessionHost {
  enrollment: EnrollmentService;
  registry: NodeRegistry;
  log: RegistryLogger;
  reportIntervalMs(): number;
  /** Makes this the node's live session, ending an older one. */
  attach(session: AgentSession): void;
  /** Forgets the session if it is still the node's live one. */
  detach(session: AgentSession): void;
  commandResult(nodeId: string, result: CommandResult__Output): Promise<void>;
  taskState(nodeId: string, state: TaskState__Output): void;
  /** The session is open; the agent runs `running` now. */
  nodeConnected(nodeId: string, running: TaskState__Output[], lastContact: number | null): void;
  /** The control plane's clock. */
  now(): number;
}

export const HELLO_TIMEOUT_MS = 10_000;
/**
 * A node's clock within this of ours is taken as it is: the difference measured includes
 * the message's time on the wire, and billing counts whole seconds.
 */
export const CLOCK_TOLERANCE_MS = 1_000;
/** How many of the latest stamped messages the offset is taken from. */
const CLOCK_SAMPLES = 8;

type Phase = 'awaiting_hello' | 'authenticating' | 'open' | 'ended';

export class AgentSession {
  nodeId: string | null = null;
  private phase: Phase = 'awaiting_hello';
  private readonly writer: StreamWriter<ControlMessage>;
  /** Messages that arrive while the Hello is being checked, handled in order after it. */
  private readonly early: AgentMessage__Output[] = [];
  private readonly helloTimer: NodeJS.Timeout;
  /** Our clock less the node's, past CLOCK_TOLERANCE_MS; 0 within it or until known. */
  private clockOffsetMs = 0;
  /** The latest differences measured (our clock at arrival less the node's at sending). */
  private readonly clockSamples: number[] = [];
  /** The agent's host facts of this session, recorded again when its clock's offset moves. */
  private facts: HostFacts__Output | null = null;

  constructor(
    private readonly call: ConnectCall,
    private readonly host: SessionHost,
  ) {
    this.writer = new StreamWriter<ControlMessage>(call, () =>
      this.end(GATEWAY_STATUS_CODES.RESOURCE_EXHAUSTED, 'the agent is not reading control messages (backpressure limit reached)'),
    );
    this.helloTimer = setTimeout(
      () => this.end(GATEWAY_STATUS_CODES.DEADLINE_EXCEEDED, `no Hello within ${HELLO_TIMEOUT_MS} ms of opening the stream`),
      HELLO_TIMEOUT_MS,
    );
    this.helloTimer.unref();
    call.on('data', (message: AgentMessage__Output) => this.receive(message));
    // The agent half-closed its side: close ours cleanly. A connection torn down under us
    // (keepalive timeout) emits 'end' just before 'cancelled': let 'cancelled' say so first.
    call.on('end', () => setImmediate(() => this.end(GATEWAY_STATUS_CODES.OK, 'the agent closed the stream')));
    call.on('cancelled', () => this.gone('cancelled by the agent or the connection'));
    // Our own end() emits 'error' to send a status; by then the phase is 'ended'.
    call.on('error', (err: Error) => this.gone(`stream error: ${err.message}`));
  }

  get open(): boolean {
    return this.phase === 'open';
  }

  /** A getter, so checks after an await see the current phase. */
  private get ended(): boolean {
    return this.phase === 'ended';
  }

  sendCommand(command: Command): boolean {
    return this.open && this.writer.send({ command });
  }

  sendReportInterval(intervalMs: number): boolean {
    return this.open && this.writer.send({ report_interval: { interval_ms: intervalMs } });
  }

  /** Ends the stream with a status the agent sees (OK ends it cleanly). Safe to repeat. */
  end(status: StatusMeaning, details: string): void {
    if (this.phase === 'ended') return;
    this.finish();
    this.host.log.debug({ node: this.nodeId, code: status.code, details }, 'agent session ended');
    if (this.call.cancelled) return;
    if (status.code === GATEWAY_STATUS_CODES.OK.code) this.call.end();
    else this.call.emit('error', { code: status.code, details });
  }

  /** The stream is gone under us: forget it, write nothing. */
  private gone(why: string): void {
    if (this.phase === 'ended') return;
    this.finish();
    this.host.log.info({ node: this.nodeId, why }, 'agent session gone');
  }

  private finish(): void {
    this.phase = 'ended';
    clearTimeout(this.helloTimer);
    this.writer.close();
    this.early.length = 0;
    this.host.detach(this);
  }

  private receive(message: AgentMessage__Output): void {
    switch (this.phase) {
      case 'awaiting_hello':
        if (message.body !== 'hello' || !message.hello) {
          this.end(GATEWAY_STATUS_CODES.INVALID_ARGUMENT, `the first message must be Hello, got ${message.body ?? 'an empty message'}`);
          return;
        }
        this.phase = 'authenticating';
        void this.handshake(message.hello);
        return;
      case 'authenticating':
        this.early.push(message);
        return;
      case 'open':
        this.dispatch(message);
        return;
      case 'ended':
        return;
    }
  }

  private async handshake(hello: Hello__Output): Promise<void> {
    try {
      checkProtocolVersion(hello.protocol_version);
      const node = await this.host.enrollment.authenticate(hello.node_id, hello.node_secret, peerHost(this.call.getPeer()));
      if (this.ended) return;
      // Read before sessionStarted overwrites it: how long the node was away, for billing.
      // The later of the two: with several replicas, the one the agent left flushed it to the store.
      const remembered = this.host.registry.lastContact(node.id);
      const lastContact = remembered == null ? node.lastSeenAt : Math.max(remembered, node.lastSeenAt ?? remembered);
      await this.host.registry.sessionStarted(node, {
        hostname: hello.hostname || node.hostname,
        agentVersion: hello.agent_version,
        protocolVersion: hello.protocol_version,
      });
      if (this.ended) return;
      if (hello.pool && hello.pool !== node.pool) {
        this.host.log.warn({ node: node.id, pool: node.pool, hello_pool: hello.pool }, 'agent names another pool than it enrolled in; keeping the enrolled pool');
      }
      clearTimeout(this.helloTimer);
      this.nodeId = node.id;
      this.noteClock(hello.sent_at_ms);
      this.phase = 'open';
      this.host.attach(this);
      this.writer.send({
        welcome: { node_id: node.id, protocol_version: PROTOCOL_VERSION, report_interval_ms: this.host.reportIntervalMs() },
      });
      this.host.log.info({ node: node.id, hostname: hello.hostname, agent_version: hello.agent_version }, 'agent session open');
      // What the agent runs right now, for the instances feature to reconcile.
      this.host.nodeConnected(node.id, hello.running_tasks.map((task) => this.onOurClock(task)), lastContact);
      for (const message of this.early.splice(0)) this.dispatch(message);
    } catch (err) {
      if (err instanceof NodeRefusal) {
        this.host.log.warn({ node: hello.node_id, hostname: hello.hostname, why: err.message }, 'agent session refused');
        this.end({ code: refusalStatus(err.reason), retryable: err.retryable, meaning: err.reason }, err.message);
      } else {
        this.host.log.error({ err, node: hello.node_id }, 'agent handshake failed');
        this.end(GATEWAY_STATUS_CODES.INTERNAL, 'the control plane could not register the session; retry');
      }
    }
  }

  private dispatch(message: AgentMessage__Output): void {
    const nodeId = this.nodeId!;
    const registry = this.host.registry;
    switch (message.body) {
      case 'heartbeat':
        registry.seen(nodeId);
        this.noteClock(message.heartbeat!.sent_at_ms);
        this.writer.send({ ack: { heartbeat_seq: message.heartbeat!.seq } });
        return;
      case 'telemetry':
        registry.telemetry(nodeId, message.telemetry!);
        return;
      case 'health_event':
        this.persist(registry.healthEvent(nodeId, message.health_event!), 'health event');
        return;
      case 'host_facts':
        this.facts = message.host_facts!;
        this.persist(registry.hostFacts(nodeId, this.facts, this.nodeClockOffsetMs()), 'host facts');
        return;
      case 'command_result':
        registry.seen(nodeId);
        this.persist(this.host.commandResult(nodeId, message.command_result!), 'command result');
        return;
      case 'task_state':
        registry.seen(nodeId);
        this.host.taskState(nodeId, this.onOurClock(message.task_state!));
        return;
      case 'hello':
        this.end(GATEWAY_STATUS_CODES.INVALID_ARGUMENT, 'a second Hello on an open session');
        return;
      default:
        // A newer agent's message this control plane does not know: proof of life only.
        registry.seen(nodeId);
    }
  }

  /**
   * How far the node's clock is from ours, from a message it stamped as it sent it (0: an
   * older agent's Hello). Docker stamps a container's end on the node's clock, and billing
   * ends there: a node an hour behind would have billed an hour less, one ahead up to how
   * late it reported.
   */
  private noteClock(sentAtMs: number): void {
    if (!(sentAtMs > 0)) return;
    // A message's time on the wire and in our event loop only adds to the difference, so
    // the least of the latest few is the offset (a stalled loop does not move the clock).
    this.clockSamples.push(this.host.now() - sentAtMs);
    if (this.clockSamples.length > CLOCK_SAMPLES) this.clockSamples.shift();
    const difference = Math.min(...this.clockSamples);
    const offset = Math.abs(difference) > CLOCK_TOLERANCE_MS ? difference : 0;
    const moved = Math.abs(offset - this.clockOffsetMs) > CLOCK_TOLERANCE_MS;
    if (offset !== 0 && moved) {
      this.host.log.warn(
        { node: this.nodeId, node_clock_behind_ms: offset },
        "the node's clock is off from the control plane's; the times it reports are read on the control plane's clock (run NTP on the node)",
      );
    }
    this.clockOffsetMs = offset;
    // Operators see it with the host facts (svcctl nodes show, the operators' listener).
    if (moved && this.facts && this.nodeId) this.persist(this.host.registry.hostFacts(this.nodeId, this.facts, this.nodeClockOffsetMs()), 'host facts');
  }

  /** The node's clock less ours, as operators read it: positive when the node is ahead. */
  private nodeClockOffsetMs(): number {
    return this.clockOffsetMs === 0 ? 0 : -this.clockOffsetMs;
  }

  /** A task state with the node's times moved onto our clock (0, unknown, stays 0). */
  private onOurClock(state: TaskState__Output): TaskState__Output {
    const offset = this.clockOffsetMs;
    if (offset === 0) return state;
    const shift = (ms: number): number => (ms > 0 ? ms + offset : ms);
    return { ...state, at_ms: shift(state.at_ms), stopped_at_ms: shift(state.stopped_at_ms) };
  }

  /** A write the agent relies on failed: end the session so the agent reconnects and resends. */
  private persist(work: Promise<void>, what: string): void {
    work.catch((err: unknown) => {
      this.host.log.error({ err, node: this.nodeId }, `could not record ${what}`);
      this.end(GATEWAY_STATUS_CODES.INTERNAL, `the control plane could not record a ${what}; reconnect and resend`);
    });
  }
}
