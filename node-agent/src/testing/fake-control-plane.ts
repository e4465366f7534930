// An in-memory fake of the control plane for the agent's tests: a REAL @grpc/grpc-js
// server on 127.0.0.1 implementing AgentGateway (Enroll + Connect) that records what the
// agent sends and lets a test answer, push control messages, refuse, and restart on the
// same port. No store, no registry: just the protocol.
import * as grpc from '@grpc/grpc-js';
import {
  loadAgentProto,
  PROTOCOL_VERSION,
  type AgentMessage__Output,
  type ControlMessage,
  type EnrollRequest__Output,
} from '@svc/proto';

export interface FakeSession {
  hello: NonNullable<AgentMessage__Output['hello']>;
  messages: AgentMessage__Output[];
  call: grpc.ServerDuplexStream<AgentMessage__Output, ControlMessage>;
  ended: boolean;
  send(message: ControlMessage): void;
}

export interface FakeControlPlaneOptions {
  reportIntervalMs?: number;
  /** Serve TLS; with `clientCa`, require client certificates signed by it (mutual TLS). */
  tls?: { cert: Buffer; key: Buffer; clientCa?: Buffer };
  /** Tokens Enroll accepts (each once). */
  tokens?: string[];
  /** False: never Ack heartbeats (a hung control plane). */
  ackHeartbeats?: boolean;
  /** The loopback address to listen on (127.0.0.1 by default); `port` may be set before start. */
  host?: string;
}

export class FakeControlPlane {
  readonly enrollments: EnrollRequest__Output[] = [];
  readonly sessions: FakeSession[] = [];
  /** node id -> secret issued by Enroll. */
  readonly nodes = new Map<string, string>();
  reportIntervalMs: number;
  private readonly tokens: Set<string>;
  private readonly tls: FakeControlPlaneOptions['tls'];
  private readonly ackHeartbeats: boolean;
  private readonly host: string;
  private server: grpc.Server | undefined;
  private nextNode = 1;
  private listeners: Array<() => void> = [];
  port = 0;

  constructor(options: FakeControlPlaneOptions = {}) {
    this.reportIntervalMs = options.reportIntervalMs ?? 200;
    this.tokens = new Set(options.tokens ?? ['good-token']);
    this.tls = options.tls;
    this.ackHeartbeats = options.ackHeartbeats ?? true;
    this.host = options.host ?? '127.0.0.1';
  }

  get address(): string {
    return `${this.host}:${this.port}`;
  }

  async start(): Promise<this> {
    const server = new grpc.Server();
    server.addService(loadAgentProto().svc.agent.v1.AgentGateway.service, {
      Enroll: (call: grpc.ServerUnaryCall<EnrollRequest__Output, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        this.enrollments.push(call.request);
        if (!this.tokens.delete(call.request.token)) {
          callback({ code: grpc.status.UNAUTHENTICATED, details: 'unknown, used or revoked enrollment token' });
          return;
        }
        const nodeId = `node_${this.nextNode++}`;
        const secret = `secret-${nodeId}`;
        this.nodes.set(nodeId, secret);
        callback(null, { node_id: nodeId, node_secret: secret });
      },
      Connect: (call: grpc.ServerDuplexStream<AgentMessage__Output, ControlMessage>) => this.connect(call),
    });
    this.port = await new Promise<number>((resolve, reject) => {
      const credentials = this.tls
        ? grpc.ServerCredentials.createSsl(this.tls.clientCa ?? null, [{ cert_chain: this.tls.cert, private_key: this.tls.key }], Boolean(this.tls.clientCa))
        : grpc.ServerCredentials.createInsecure();
      server.bindAsync(`${this.host}:${this.port}`, credentials, (err, port) => (err ? reject(err) : resolve(port)));
    });
    this.server = server;
    return this;
  }

  /** Drops every stream at once, as a crashed or restarting control plane does. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    server?.forceShutdown();
  }

  /** Resolves when `predicate` holds, checked after every message and session. */
  waitFor<T>(predicate: () => T | undefined | false, timeoutMs = 5_000, what = 'condition'): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const value = predicate();
        if (value === undefined || value === false) return false;
        cleanup();
        resolve(value);
        return true;
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        this.listeners = this.listeners.filter((l) => l !== listener);
      };
      const listener = (): void => void check();
      this.listeners.push(listener);
      check();
    });
  }

  /** Every message of one kind across sessions, in order. */
  messagesOf<K extends NonNullable<AgentMessage__Output['body']>>(kind: K): Array<NonNullable<AgentMessage__Output[K]>> {
    return this.sessions.flatMap((s) => s.messages.filter((m) => m.body === kind).map((m) => m[kind] as NonNullable<AgentMessage__Output[K]>));
  }

  get current(): FakeSession | undefined {
    return this.sessions.filter((s) => !s.ended).at(-1);
  }

  private connect(call: grpc.ServerDuplexStream<AgentMessage__Output, ControlMessage>): void {
    let session: FakeSession | undefined;
    call.on('data', (message: AgentMessage__Output) => {
      if (!session) {
        const hello = message.hello;
        if (message.body !== 'hello' || !hello) {
          call.emit('error', { code: grpc.status.FAILED_PRECONDITION, details: 'the first message must be Hello' });
          return;
        }
        if (this.nodes.get(hello.node_id) !== hello.node_secret) {
          call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: `unknown node ${hello.node_id}` });
          return;
        }
        session = {
          hello,
          messages: [],
          call,
          ended: false,
          send: (m) => void (!session!.ended && call.write(m)),
        };
        this.sessions.push(session);
        call.write({ body: 'welcome', welcome: { node_id: hello.node_id, protocol_version: PROTOCOL_VERSION, report_interval_ms: this.reportIntervalMs } });
      } else {
        session.messages.push(message);
        if (message.body === 'heartbeat' && this.ackHeartbeats) call.write({ body: 'ack', ack: { heartbeat_seq: message.heartbeat!.seq } });
      }
      this.notify();
    });
    const end = (): void => {
      if (session) session.ended = true;
      this.notify();
    };
    call.on('end', () => {
      end();
      call.end();
    });
    call.on('error', end);
    call.on('cancelled', end);
    call.on('close', end);
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
