// The agent gateway: the gRPC server agents dial (Enroll, then one Connect stream each),
// the table of live sessions (one per node: a newer session replaces an older one), and
// the lifecycle of the live registry and the command dispatcher behind it. Only the
// holder of a node's stream writes to it: with several replicas, a command for a node
// another replica holds is queued in the store for that holder (session-relay.ts).
import * as grpc from '@grpc/grpc-js';
import { systemClock, type Clock } from '@svc/shared';
import { loadAgentProto, type AgentGatewayHandlers, type Command, type CommandResult__Output, type TaskState__Output } from '@svc/proto';
import type { ControlPlaneConfig } from '../config.js';
import type { EnrollmentService } from '../nodes/enrollment-service.js';
import { NodeRegistry, type RegistryLogger } from '../nodes/node-registry.js';
import { NodeRefusal } from '../nodes/refusal.js';
import { resolveNodeTiming } from '../nodes/timing.js';
import type { NodeStore } from '../store/node-store.js';
import { CommandDispatcher } from './command-dispatcher.js';
import { AgentSession, type SessionHost } from './session.js';
import { localOnly, type SessionRelay } from './session-relay.js';
import { peerHost } from './peer-host.js';
import { GATEWAY_STATUS_CODES, refusalStatus } from './status-codes.js';
import { serverCredentials } from './transport.js';

export type GatewayConfig = Pick<
  ControlPlaneConfig,
  | 'grpcHost'
  | 'grpcPort'
  | 'grpcTlsCert'
  | 'grpcTlsKey'
  | 'grpcTlsCa'
  | 'grpcMutualTls'
  | 'grpcKeepaliveMs'
  | 'grpcKeepaliveTimeoutMs'
  | 'grpcMaxMessageBytes'
  | 'reportIntervalMs'
  | 'nodeDeadlineMs'
  | 'telemetryFlushMs'
>;

export interface GatewayDeps {
  config: GatewayConfig;
  store: NodeStore;
  enrollment: EnrollmentService;
  log: RegistryLogger;
  clock?: Clock;
  /** Where the instances feature hooks task states in; logged at debug until then. */
  onTaskState?: (nodeId: string, state: TaskState__Output) => void;
  /** Results of commands sent with send() (not operator commands from the store). */
  onCommandResult?: (nodeId: string, result: CommandResult__Output) => void;
  /**
   * A session opened; `runningTasks` is what the agent runs now (Hello); `lastContact`: when
   * the node was last heard of before this session (null for a first session). Default:
   * each running task goes to onTaskState.
   */
  onNodeConnected?: (nodeId: string, runningTasks: TaskState__Output[], lastContact: number | null) => void;
  /** The registry's sweep found the node silent past the deadline. */
  onNodeUnreachable?: (nodeId: string) => void;
  /** How this replica reaches streams other replicas hold; default: one process, all local. */
  relay?: SessionRelay;
}

/**
 * Server-side keepalive: ping each connection every grpcKeepaliveMs (5 s), close it when a
 * ping goes unanswered for grpcKeepaliveTimeoutMs (3 s): a partition or a vanished host
 * ends its sessions within ~8 s, so commands are no longer written into a dead stream
 * (they wait for the agent's Hello, which re-sends them). grpc-js servers enforce no client
 * ping policy, so agents keep alive at their own interval too (5 s by default).
 * Concurrent streams per connection stay unlimited: a load balancer may carry many agents'
 * streams over one HTTP/2 connection. Messages are bounded both ways (grpc-js receives up
 * to 4 MiB and sends without limit by default), so neither side can make the other buffer
 * an unbounded message.
 */
export function serverOptions(config: GatewayConfig): grpc.ServerOptions {
  return {
    'grpc.keepalive_time_ms': config.grpcKeepaliveMs,
    'grpc.keepalive_timeout_ms': config.grpcKeepaliveTimeoutMs,
    'grpc.max_receive_message_length': config.grpcMaxMessageBytes,
    'grpc.max_send_message_length': config.grpcMaxMessageBytes,
  };
}

const hostPort = (host: string, port: number): string => (host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`);

export class AgentGateway {
  readonly registry: NodeRegistry;
  private readonly server: grpc.Server;
  private readonly sessions = new Map<string, AgentSession>();
  /** When each live session opened: with the replica, what names it to other replicas. */
  private readonly openedAt = new Map<string, number>();
  private readonly dispatcher: CommandDispatcher;
  private readonly relay: SessionRelay;
  private readonly clock: Clock;
  private readonly host: SessionHost;
  private reportIntervalMs: number;
  private boundPort: number | null = null;

  constructor(private readonly deps: GatewayDeps) {
    const clock = deps.clock ?? systemClock;
    this.clock = clock;
    // Cross-field timing rules fail here, at start-up.
    const timing = resolveNodeTiming(deps.config);
    this.reportIntervalMs = timing.reportIntervalMs;
    this.registry = new NodeRegistry(deps.store, clock, timing, deps.log);
    this.relay = deps.relay ?? localOnly();
    this.dispatcher = new CommandDispatcher(
      deps.store,
      this.registry,
      clock,
      (id) => this.sessions.get(id),
      deps.log,
      undefined,
      deps.relay ? () => [...this.sessions.keys()] : null,
    );
    this.relay.localSessions = () => [...this.openedAt];
    // Commands were queued for a node: the holder sends them now rather than at its next poll.
    this.relay.onWork = (nodeId) => {
      if (this.sessions.has(nodeId)) void this.dispatcher.poll().catch((err: unknown) => deps.log.error({ err }, 'node command poll failed'));
    };
    this.host = {
      enrollment: deps.enrollment,
      registry: this.registry,
      log: deps.log,
      reportIntervalMs: () => this.reportIntervalMs,
      attach: (session) => {
        const nodeId = session.nodeId!;
        const older = this.sessions.get(nodeId);
        this.sessions.set(nodeId, session);
        older?.end(GATEWAY_STATUS_CODES.ABORTED, `replaced by a newer session of node ${nodeId}`);
        const since = this.clock.now();
        this.openedAt.set(nodeId, since);
        this.relay.attached([nodeId, since]);
        // Commands other replicas queued while the node's stream was elsewhere (or nowhere).
        this.relay.onWork(nodeId);
      },
      detach: (session) => {
        if (!session.nodeId || this.sessions.get(session.nodeId) !== session) return;
        this.sessions.delete(session.nodeId);
        const since = this.openedAt.get(session.nodeId);
        this.openedAt.delete(session.nodeId);
        if (since !== undefined) this.relay.detached([session.nodeId, since]);
      },
      commandResult: async (nodeId, result) => {
        if (await this.dispatcher.result(nodeId, result)) return;
        if (deps.onCommandResult) deps.onCommandResult(nodeId, result);
        else deps.log.warn({ node: nodeId, command: result.command_id }, 'result for an unknown command');
      },
      taskState: deps.onTaskState ?? ((nodeId, state) => deps.log.debug({ node: nodeId, task: state.task_id, state: state.state }, 'task state')),
      nodeConnected: (nodeId, running, lastContact) => {
        if (deps.onNodeConnected) deps.onNodeConnected(nodeId, running, lastContact);
        else for (const task of running) this.host.taskState(nodeId, task);
      },
      now: () => clock.now(),
    };
    // A session silent past the deadline is left open: keepalive (both sides) already
    // closes a connection that stopped answering, and any later message on it brings the
    // node back.
    if (deps.onNodeUnreachable) this.registry.onUnreachable = deps.onNodeUnreachable;
    this.server = new grpc.Server(serverOptions(deps.config));
    this.server.addService(loadAgentProto().svc.agent.v1.AgentGateway.service, this.handlers());
  }

  private handlers(): AgentGatewayHandlers {
    return {
      Enroll: (call, callback) => {
        const request = call.request;
        this.deps.enrollment
          .enroll({
            token: request.token,
            hostname: request.hostname,
            pool: request.pool,
            protocolVersion: request.protocol_version,
            address: peerHost(call.getPeer()),
          })
          .then(
            ({ node, secret }) => {
              this.deps.log.info({ node: node.id, hostname: node.hostname, pool: node.pool }, 'node enrolled');
              callback(null, { node_id: node.id, node_secret: secret });
            },
            (err: unknown) => {
              if (err instanceof NodeRefusal) {
                this.deps.log.warn({ hostname: request.hostname, why: err.message }, 'enrollment refused');
                callback({ code: refusalStatus(err.reason), details: err.message });
              } else {
                this.deps.log.error({ err }, 'enrollment failed');
                callback({ code: grpc.status.INTERNAL, details: 'the control plane could not enroll the node; retry' });
              }
            },
          );
      },
      Connect: (call) => {
        new AgentSession(call, this.host);
      },
    };
  }

  /** Checks the transport settings, loads the registry and binds; returns the bound port. */
  async listen(): Promise<number> {
    const credentials = serverCredentials(this.deps.config);
    await this.relay.start();
    await this.registry.load();
    this.boundPort = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(hostPort(this.deps.config.grpcHost, this.deps.config.grpcPort), credentials, (err, port) =>
        err ? reject(new Error(`agent gateway cannot listen on ${this.deps.config.grpcHost}:${this.deps.config.grpcPort}: ${err.message}`)) : resolve(port),
      );
    });
    this.registry.start();
    this.dispatcher.start();
    return this.boundPort;
  }

  get port(): number {
    if (this.boundPort === null) throw new Error('the agent gateway is not listening');
    return this.boundPort;
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  session(nodeId: string): AgentSession | undefined {
    return this.sessions.get(nodeId);
  }

  /**
   * Sends a command (e.g. StartTask) on the node's live session, or queues it for the
   * replica that holds the session; false when no replica announced one right now. The
   * agent's CommandResult goes to onCommandResult of the process that wrote it.
   */
  send(nodeId: string, command: Command): boolean {
    const session = this.sessions.get(nodeId);
    if (session) return session.sendCommand(command);
    if (!this.relay.heldElsewhere(nodeId)) return false;
    this.deps.store.queueRelayedCommand({ nodeId, command: JSON.stringify(command), createdAt: this.clock.now() }).catch((err: unknown) =>
      // Lost with the store: the node's next Hello re-sends what still matters, as for a command written into a dying stream.
      this.deps.log.error({ err, node: nodeId, command: command.command_id }, 'could not queue a command for the replica holding the node'),
    );
    return true;
  }

  /** Sends pending operator commands now (the dispatcher also does this every second). */
  pollCommands(): Promise<void> {
    return this.dispatcher.poll();
  }

  /** Tells every connected agent a new report interval. */
  setReportInterval(intervalMs: number): void {
    this.reportIntervalMs = intervalMs;
    for (const session of this.sessions.values()) session.sendReportInterval(intervalMs);
  }

  /** Ends every session cleanly (agents reconnect elsewhere or later), then stops. */
  async close(): Promise<void> {
    await this.dispatcher.stop();
    for (const session of [...this.sessions.values()]) session.end(GATEWAY_STATUS_CODES.OK, 'the control plane is shutting down');
    await this.relay.close();
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 2000);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
    await this.registry.stop();
  }
}
