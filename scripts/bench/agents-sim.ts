// Bench helper: simulated node agents, each ONE real Connect stream (Hello, then a
// heartbeat and 8 GPUs of telemetry every report interval the server's Welcome names).
// Streams are spread over many channels (one HTTP/2 connection each, as real agents on
// separate hosts would have), STREAMS_PER_CHANNEL per channel.
// To leave the CPU to the server under test, a simulator encodes each agent's telemetry
// once (a few variants, cycled) and only counts the server's acks instead of decoding
// them: the server still decodes every message in full.
// argv: <port> <identities.json> <from> <to>. stdin: "grow <n>" connects the first n of
// this process's identities. stdout: one JSON status line per second.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { loadAgentProto, PROTOCOL_VERSION, type AgentMessage, type ControlMessage__Output, type GpuSample } from '@svc/proto';

export interface SimStatus {
  welcomed: number;
  acks: number;
  ended: number;
  lastError: string | null;
}

const STREAMS_PER_CHANNEL = 50;
const GPUS = 8;
const [portArg, identitiesFile, fromArg, toArg] = process.argv.slice(2);
const identities = (JSON.parse(readFileSync(identitiesFile!, 'utf8')) as Array<{ nodeId: string; secret: string }>).slice(
  Number(fromArg),
  Number(toArg),
);
const gateway = loadAgentProto().svc.agent.v1.AgentGateway;
const connect = gateway.service.Connect;
const encode = (m: AgentMessage): Buffer => connect.requestSerialize(m);
// The same method on the wire, with pre-encoded requests and undecoded responses.
const RawClient = grpc.makeGenericClientConstructor(
  {
    Connect: {
      path: connect.path,
      requestStream: true,
      responseStream: true,
      requestSerialize: (b: Buffer) => b,
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
    },
  },
  'RawAgentGateway',
);
type RawClientT = grpc.Client & { Connect(): grpc.ClientDuplexStream<Buffer, Buffer> };
const channels: RawClientT[] = [];
const VARIANTS = 4;
const status: SimStatus = { welcomed: 0, acks: 0, ended: 0, lastError: null };
let connected = 0;

function channelFor(i: number): RawClientT {
  const c = Math.floor(i / STREAMS_PER_CHANNEL);
  // A local subchannel pool gives each client its own connection instead of sharing one.
  channels[c] ??= new RawClient(`127.0.0.1:${portArg}`, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
  }) as unknown as RawClientT;
  return channels[c]!;
}

function gpus(i: number): GpuSample[] {
  return Array.from({ length: GPUS }, (_, index) => ({
    index,
    uuid: `GPU-${String(i).padStart(8, '0')}-0000-0000-0000-00000000000${index}`,
    name: 'NVIDIA H100 80GB HBM3',
    pci_bus_id: `00000000:${String(index + 10)}:00.0`,
    memory_total_bytes: 85_520_809_984,
    memory_used_bytes: 1_000_000_000 + index,
    utilization_gpu_percent: 0,
    utilization_memory_percent: 0,
    temperature_c: 40,
    power_usage_w: 120.5,
    power_limit_w: 700,
    sm_clock_mhz: 1980,
    memory_clock_mhz: 2619,
    ecc_corrected: 0,
    ecc_uncorrected: 0,
    retired_pages: 0,
    remapped_rows: 0,
    throttle_reasons: [],
    healthy: true,
    health_reason: '',
  }));
}

function startAgent(i: number): void {
  const { nodeId, secret } = identities[i]!;
  const call = channelFor(i).Connect();
  const samples = gpus(i);
  const telemetry = Array.from({ length: VARIANTS }, () => {
    for (const g of samples) g.utilization_gpu_percent = Math.floor(Math.random() * 100);
    return encode({ telemetry: { sampled_at_ms: Date.now(), gpus: samples } });
  });
  let seq = 0;
  let timer: NodeJS.Timeout | undefined;
  let welcomed = false;
  const report = (): void => {
    seq++;
    call.write(encode({ heartbeat: { seq, sent_at_ms: Date.now() } }));
    call.write(telemetry[seq % VARIANTS]!);
  };
  call.on('data', (raw: Buffer) => {
    if (welcomed) {
      status.acks++; // the only message the server sends after Welcome in this bench
      return;
    }
    const m = connect.responseDeserialize(raw) as ControlMessage__Output;
    if (m.body !== 'welcome') return;
    welcomed = true;
    status.welcomed++;
    const interval = m.welcome!.report_interval_ms;
    // A random phase, as agents that started at different times would have.
    timer = setTimeout(() => {
      report();
      timer = setInterval(report, interval);
    }, Math.random() * interval);
  });
  call.on('error', (err: Error) => {
    status.lastError = err.message;
  });
  call.on('status', () => {
    status.ended++;
    clearTimeout(timer);
    clearInterval(timer);
  });
  call.write(
    encode({
      hello: { node_id: nodeId, node_secret: secret, protocol_version: PROTOCOL_VERSION, agent_version: 'bench', hostname: `sim-${i}`, pool: 'na', running_tasks: [] },
    }),
  );
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const match = /^grow (\d+)$/.exec(line.trim());
  if (!match) return;
  const target = Math.min(Number(match[1]), identities.length);
  // Open streams in small batches so the event loop keeps serving the live ones.
  const step = (): void => {
    const end = Math.min(target, connected + 200);
    for (; connected < end; connected++) startAgent(connected);
    if (connected < target) setImmediate(step);
  };
  step();
});
process.stdin.on('end', () => process.exit(0));
setInterval(() => process.stdout.write(`${JSON.stringify(status)}\n`), 1000);
