// An in-test fake of the node agent: the real protocol over real gRPC (grpc-js and the
// same .proto), driven step by step by a test. Not the agent: no NVML, no Docker.
import * as grpc from '@grpc/grpc-js';
import {
  loadAgentProto,
  PROTOCOL_VERSION,
  type AgentGatewayClient,
  type AgentMessage,
  type ControlMessage__Output,
  type EnrollResponse__Output,
  type GpuSample,
} from '@svc/proto';

export interface EndStatus {
  code: grpc.status;
  details: string;
}

export function gatewayClient(address: string, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}): AgentGatewayClient {
  const Client = loadAgentProto().svc.agent.v1.AgentGateway;
  return new Client(address, credentials, options);
}

export function enroll(
  client: AgentGatewayClient,
  token: string,
  options: { hostname?: string; pool?: string; protocolVersion?: number } = {},
): Promise<EnrollResponse__Output> {
  return new Promise((resolve, reject) => {
    client.Enroll(
      { token, hostname: options.hostname ?? 'gpu-host-1', pool: options.pool ?? 'na', protocol_version: options.protocolVersion ?? PROTOCOL_VERSION },
      { deadline: Date.now() + 5000 },
      (err, response) => (err ? reject(err) : resolve(response!)),
    );
  });
}

/** One Connect stream: what it received, how it ended, and a way to send. */
export class FakeSession {
  readonly received: ControlMessage__Output[] = [];
  readonly ended: Promise<EndStatus>;
  private readonly call: grpc.ClientDuplexStream<AgentMessage, ControlMessage__Output>;
  private waiters: Array<() => void> = [];

  constructor(client: AgentGatewayClient, first: AgentMessage | null) {
    this.call = client.Connect();
    this.call.on('data', (message: ControlMessage__Output) => {
      this.received.push(message);
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.ended = new Promise((resolve) => {
      this.call.on('status', (status: grpc.StatusObject) => resolve({ code: status.code, details: status.details }));
      // 'error' carries the same status; listening keeps it from being thrown.
      this.call.on('error', () => undefined);
    });
    if (first) this.send(first);
  }

  send(message: AgentMessage): void {
    this.call.write(message);
  }

  /** Resolves with the first received message (past or future) that matches. */
  async next(match: (m: ControlMessage__Output) => boolean, timeoutMs = 5000): Promise<ControlMessage__Output> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.received.find(match);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no matching control message within ${timeoutMs} ms; got ${JSON.stringify(this.received)}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  close(): void {
    this.call.end();
  }

  cancel(): void {
    this.call.cancel();
  }
}

export function hello(nodeId: string, secret: string, over: Partial<NonNullable<AgentMessage['hello']>> = {}): AgentMessage {
  return {
    hello: {
      node_id: nodeId,
      node_secret: secret,
      protocol_version: PROTOCOL_VERSION,
      agent_version: '0.1.0-test',
      hostname: 'gpu-host-1',
      pool: 'na',
      running_tasks: [],
      ...over,
    },
  };
}

export function gpuSample(index: number, over: Partial<GpuSample> = {}): GpuSample {
  return {
    index,
    uuid: `GPU-0000000${index}-1111-2222-3333-444444444444`,
    name: 'NVIDIA H100 80GB HBM3',
    pci_bus_id: `00000000:0${index}:00.0`,
    memory_total_bytes: 80 * 2 ** 30,
    memory_used_bytes: 2 ** 30,
    utilization_gpu_percent: 40 + index,
    temperature_c: 50,
    power_usage_w: 300.5,
    power_limit_w: 700,
    throttle_reasons: [],
    healthy: true,
    health_reason: '',
    ...over,
  };
}
