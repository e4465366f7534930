// The agent gateway over real gRPC on loopback against an in-test fake agent: enrollment,
// the session handshake and its refusals, telemetry into the registry, health events,
// the unreachable deadline, commands, session replacement and a control-plane restart.
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '@svc/proto';
import { AgentGateway, type GatewayDeps } from '../src/agents/gateway.js';
import { buildServices, type Services } from '../src/app.js';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../src/config.js';
import { openSqliteStore, type SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { FakeSession, enroll, gatewayClient, gpuSample, hello } from './fake-agent.js';
import { tempDataDir } from './harness.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const REPORT_MS = 200;
const DEADLINE_MS = 600;

interface Plane {
  gateway: AgentGateway;
  store: SqliteStore;
  services: Services;
  clock: ManualClock;
  dataDir: string;
  address: string;
  close(): Promise<void>;
}

const planes: Plane[] = [];
const dirs: string[] = [];

async function startPlane(
  options: { dataDir?: string; port?: number; clock?: ManualClock; config?: Partial<ControlPlaneConfig>; hooks?: Pick<GatewayDeps, 'onTaskState' | 'onCommandResult' | 'onNodeConnected'> } = {},
): Promise<Plane> {
  const dataDir = options.dataDir ?? tempDataDir();
  if (!options.dataDir) dirs.push(dataDir);
  const clock = options.clock ?? new ManualClock(Date.now());
  const config = defaultControlPlaneConfig({
    dataDir,
    grpcPort: options.port ?? 0,
    reportIntervalMs: REPORT_MS,
    nodeDeadlineMs: DEADLINE_MS,
    logLevel: 'silent',
    ...options.config,
  });
  const store = openSqliteStore(dataDir);
  const services = buildServices({ config, store, clock });
  const gateway = new AgentGateway({ config, store: store.nodes, enrollment: services.enrollment, log: silent, clock, ...options.hooks });
  const port = await gateway.listen();
  let closed = false;
  const plane: Plane = {
    gateway,
    store,
    services,
    clock,
    dataDir,
    address: `127.0.0.1:${port}`,
    async close() {
      if (closed) return;
      closed = true;
      await gateway.close();
      await store.close();
    },
  };
  planes.push(plane);
  return plane;
}

afterEach(async () => {
  for (const plane of planes.splice(0)) await plane.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Enrolls a node with a fresh token and opens a session that got its Welcome. */
async function connectedNode(plane: Plane) {
  const client = gatewayClient(plane.address);
  const { value } = await plane.services.enrollment.createToken({ pool: 'na' });
  const identity = await enroll(client, value);
  const session = new FakeSession(client, hello(identity.node_id, identity.node_secret));
  await session.next((m) => m.body === 'welcome');
  return { client, identity, session };
}

async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 3000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('enrollment', () => {
  it('exchanges a token once for a node identity', async () => {
    const plane = await startPlane();
    const client = gatewayClient(plane.address);
    const { value, record } = await plane.services.enrollment.createToken({ pool: 'eu' });
    const identity = await enroll(client, value, { hostname: 'gpu-eu-1', pool: '' });
    expect(identity.node_id).toMatch(/^node_/);
    expect(identity.node_secret).toMatch(/^svc_ns_/);
    const node = await plane.store.nodes.getNode(identity.node_id);
    expect(node).toMatchObject({ hostname: 'gpu-eu-1', pool: 'eu', status: 'enrolled' });
    // Only digests are stored.
    const secretHash = await plane.store.nodes.getNodeSecretHash(identity.node_id);
    expect(secretHash!.toString('hex')).not.toContain(Buffer.from(identity.node_secret).toString('hex'));

    const again = await enroll(client, value).catch((err: grpc.ServiceError) => err);
    expect(again).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    expect((again as grpc.ServiceError).details).toContain(`enrollment token ${record.id} was already used`);
  });

  it('refuses unknown, revoked and expired tokens with UNAUTHENTICATED and a clear message', async () => {
    const plane = await startPlane();
    const client = gatewayClient(plane.address);
    const refusal = (token: string) => enroll(client, token).then(() => undefined, (err: grpc.ServiceError) => err);

    const unknown = await refusal('svc_nt_notarealtoken');
    expect(unknown).toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    expect(unknown!.details).toMatch(/enrollment token not recognized; create a new one with `svcctl nodes token create`/);

    const revoked = await plane.services.enrollment.createToken();
    await plane.services.enrollment.revokeToken(revoked.record.id);
    expect((await refusal(revoked.value))!.details).toContain('was revoked');

    const expiring = await plane.services.enrollment.createToken({ ttlSeconds: 60 });
    plane.clock.advance(61_000);
    expect((await refusal(expiring.value))!.details).toContain('expired at');
    expect(await plane.store.nodes.listNodes()).toEqual([]);
  });

  it('refuses a token for another pool and an old protocol', async () => {
    const plane = await startPlane();
    const client = gatewayClient(plane.address);
    const { value } = await plane.services.enrollment.createToken({ pool: 'eu' });
    const wrongPool = await enroll(client, value, { pool: 'na' }).catch((err: grpc.ServiceError) => err);
    expect(wrongPool).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect((wrongPool as grpc.ServiceError).details).toContain('is for pool eu, but the agent asked for pool na');
    const old = await enroll(client, value, { protocolVersion: MIN_PROTOCOL_VERSION - 1, pool: 'eu' }).catch((err: grpc.ServiceError) => err);
    expect(old).toMatchObject({ code: grpc.status.FAILED_PRECONDITION });
  });
});

describe('Connect handshake', () => {
  it('welcomes a valid identity with the server-decided report interval and acks heartbeats', async () => {
    const plane = await startPlane();
    const { identity, session } = await connectedNode(plane);
    const welcome = session.received.find((m) => m.body === 'welcome')!.welcome!;
    expect(welcome).toEqual({ node_id: identity.node_id, protocol_version: PROTOCOL_VERSION, report_interval_ms: REPORT_MS });

    session.send({ heartbeat: { seq: 7, sent_at_ms: Date.now() } });
    const ack = await session.next((m) => m.body === 'ack');
    expect(ack.ack!.heartbeat_seq).toBe(7);

    const node = await plane.store.nodes.getNode(identity.node_id);
    expect(node).toMatchObject({ status: 'ready', agentVersion: '0.1.0-test', protocolVersion: PROTOCOL_VERSION });
    const timeline = await plane.store.nodes.listHealthEvents(identity.node_id, 10);
    expect(timeline.map((e) => e.kind)).toEqual(['node_up']);

    plane.gateway.setReportInterval(300);
    const interval = await session.next((m) => m.body === 'report_interval');
    expect(interval.report_interval!.interval_ms).toBe(300);
  });

  it('refuses a wrong secret with UNAUTHENTICATED', async () => {
    const plane = await startPlane();
    const client = gatewayClient(plane.address);
    const { value } = await plane.services.enrollment.createToken();
    const identity = await enroll(client, value);
    const session = new FakeSession(client, hello(identity.node_id, `${identity.node_secret}x`));
    const end = await session.ended;
    expect(end.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(end.details).toContain(`node ${identity.node_id} is unknown or its secret is wrong`);
    expect(session.received).toEqual([]);
  });

  it('refuses an old protocol with FAILED_PRECONDITION naming both versions', async () => {
    const plane = await startPlane();
    const { identity } = await connectedNode(plane);
    const client = gatewayClient(plane.address);
    const session = new FakeSession(client, hello(identity.node_id, identity.node_secret, { protocol_version: MIN_PROTOCOL_VERSION - 1 }));
    const end = await session.ended;
    expect(end.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(end.details).toContain(`agent protocol version ${MIN_PROTOCOL_VERSION - 1} is older than the oldest this control plane accepts (${MIN_PROTOCOL_VERSION}`);
  });

  it('refuses a first message that is not Hello', async () => {
    const plane = await startPlane();
    const session = new FakeSession(gatewayClient(plane.address), { heartbeat: { seq: 1, sent_at_ms: 0 } });
    const end = await session.ended;
    expect(end.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(end.details).toContain('the first message must be Hello, got heartbeat');
  });

  it('a second session of the same node replaces the first with ABORTED', async () => {
    const plane = await startPlane();
    const { client, identity, session: first } = await connectedNode(plane);
    const second = new FakeSession(client, hello(identity.node_id, identity.node_secret));
    await second.next((m) => m.body === 'welcome');
    const end = await first.ended;
    expect(end.code).toBe(grpc.status.ABORTED);
    expect(end.details).toContain('replaced by a newer session');
    expect(plane.gateway.sessionCount).toBe(1);
    second.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
    await second.next((m) => m.body === 'ack');
  });
});

describe('refused credentials from one address', () => {
  it('costs no store lookup past 60 a minute: RESOURCE_EXHAUSTED until the allowance refills, a node that verified before still connects', async () => {
    const plane = await startPlane();
    const known = await connectedNode(plane);
    const client = gatewayClient(plane.address);
    const refusal = (token: string) => enroll(client, token).then(() => undefined, (err: grpc.ServiceError) => err);

    const sprayed = await Promise.all(Array.from({ length: 60 }, (_, i) => refusal(`svc_nt_guess${i}`)));
    expect(sprayed.map((err) => err?.code)).toEqual(Array(60).fill(grpc.status.UNAUTHENTICATED));

    // The allowance is spent: a real token is held back too, and stays unused.
    const { value, record } = await plane.services.enrollment.createToken();
    const held = await refusal(value);
    expect(held).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
    expect(held!.details).toBe('too many refused enrollment tokens from 127.0.0.1; retry after 1s');
    expect((await plane.services.enrollment.listTokens()).find((t) => t.id === record.id)!.usedAt).toBeNull();
    // Guessing node secrets draws on the same allowance.
    const guess = new FakeSession(client, hello(known.identity.node_id, `${known.identity.node_secret}x`));
    expect(await guess.ended).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED, details: 'too many refused node secrets from 127.0.0.1; retry after 1s' });

    // The node that verified here before reconnects from the same address meanwhile.
    const again = new FakeSession(client, hello(known.identity.node_id, known.identity.node_secret));
    await again.next((m) => m.body === 'welcome');

    // One refill later (one a second), the agent's retry enrolls.
    plane.clock.advance(1_000);
    expect((await enroll(client, value)).node_id).toMatch(/^node_/);
  });
});

describe('telemetry, health and the deadline', () => {
  it('buffers telemetry in memory and shows it after a flush, absent values absent', async () => {
    const plane = await startPlane();
    const { identity, session } = await connectedNode(plane);
    session.send({ telemetry: { sampled_at_ms: Date.now(), gpus: [gpuSample(0), gpuSample(1)] } });
    session.send({
      host_facts: { hostname: 'gpu-host-1', cpu_model: 'EPYC', cpu_cores: 64, memory_total_bytes: 512 * 2 ** 30, os: 'Debian GNU/Linux 12', nvml_available: true },
    });
    session.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack'); // in order: telemetry was handled before the ack
    await plane.gateway.registry.flush();

    const detail = await plane.services.nodes.show(identity.node_id);
    expect(detail.gpus.map((g) => [g.index, g.name, g.healthy])).toEqual([
      [0, 'NVIDIA H100 80GB HBM3', true],
      [1, 'NVIDIA H100 80GB HBM3', true],
    ]);
    expect(detail.gpus[1]!.sample).toMatchObject({ utilization_gpu_percent: 41, temperature_c: 50, power_usage_w: 300.5 });
    expect(detail.gpus[1]!.sample).not.toHaveProperty('utilization_memory_percent');
    expect(detail.gpus[1]!.sample).not.toHaveProperty('_utilization_memory_percent');
    expect(detail.node.hostFacts).toMatchObject({ cpu_model: 'EPYC', cpu_cores: 64 });

    // A GPU that stops being reported is pruned at the next flush.
    session.send({ telemetry: { sampled_at_ms: Date.now(), gpus: [gpuSample(0)] } });
    session.send({ heartbeat: { seq: 2, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack' && m.ack!.heartbeat_seq === 2);
    await plane.gateway.registry.flush();
    expect((await plane.store.nodes.listGpus(identity.node_id)).length).toBe(1);
  });

  it('an XID makes the GPU unhealthy at once with a timeline row; recovered makes it healthy', async () => {
    const plane = await startPlane();
    const { identity, session } = await connectedNode(plane);
    const uuid = gpuSample(3).uuid!;
    session.send({ telemetry: { sampled_at_ms: Date.now(), gpus: [gpuSample(3)] } });
    session.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack');
    await plane.gateway.registry.flush();

    session.send({ health_event: { gpu_uuid: uuid, gpu_index: 3, kind: 'XID', xid: 79, healthy: false, message: 'XID 79: GPU has fallen off the bus', at_ms: Date.now() } });
    // No flush: health events are written at once.
    const gpu = await eventually(
      async () => (await plane.store.nodes.listGpus(identity.node_id))[0]!,
      (g) => !g.healthy,
    );
    expect(gpu).toMatchObject({ healthy: false, healthReason: 'XID 79: GPU has fallen off the bus' });
    const [xid] = await plane.store.nodes.listHealthEvents(identity.node_id, 1);
    expect(xid).toMatchObject({ kind: 'xid', xid: 79, gpuUuid: uuid, gpuIndex: 3, healthy: false });

    // A flush of the telemetry buffered before the event must not undo it.
    await plane.gateway.registry.flush();
    session.send({ heartbeat: { seq: 2, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack' && m.ack!.heartbeat_seq === 2);
    await plane.gateway.registry.flush();
    expect((await plane.store.nodes.listGpus(identity.node_id))[0]!.healthy).toBe(false);
    expect(await plane.services.nodes.schedulable({ gpuModel: 'NVIDIA H100 80GB HBM3', pool: 'na' })).toEqual([]);

    session.send({ health_event: { gpu_uuid: uuid, gpu_index: 3, kind: 'RECOVERED', healthy: true, message: 'GPU reset', at_ms: Date.now() } });
    const healed = await eventually(
      async () => (await plane.store.nodes.listGpus(identity.node_id))[0]!,
      (g) => g.healthy,
    );
    expect(healed).toMatchObject({ healthy: true, healthReason: '' });
    expect((await plane.store.nodes.listHealthEvents(identity.node_id, 1))[0]).toMatchObject({ kind: 'recovered', healthy: true });
    expect(await plane.services.nodes.schedulable({ gpuModel: 'NVIDIA H100 80GB HBM3', pool: 'na' })).toEqual([
      { nodeId: identity.node_id, pool: 'na', freeGpuUuids: [uuid] },
    ]);
  });

  it('a silent node becomes unreachable after the deadline and returns on its next message', async () => {
    const plane = await startPlane();
    const { identity, session } = await connectedNode(plane);
    plane.clock.advance(DEADLINE_MS); // exactly at the deadline: still ready
    expect(await plane.gateway.registry.sweep()).toEqual([]);
    plane.clock.advance(1);
    expect(await plane.gateway.registry.sweep()).toEqual([identity.node_id]);
    const down = await plane.store.nodes.getNode(identity.node_id);
    expect(down!.status).toBe('unreachable');
    expect((await plane.store.nodes.listHealthEvents(identity.node_id, 1))[0]).toMatchObject({ kind: 'node_down' });
    expect(await plane.gateway.registry.sweep()).toEqual([]); // recorded once

    session.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack');
    const up = await eventually(() => plane.store.nodes.getNode(identity.node_id), (n) => n!.status === 'ready');
    expect(up!.status).toBe('ready');
    expect((await plane.store.nodes.listHealthEvents(identity.node_id, 1))[0]).toMatchObject({ kind: 'node_up' });
  });

  it('with the real clock, an agent that vanishes is unreachable within the deadline plus a sweep', async () => {
    const dataDir = tempDataDir();
    dirs.push(dataDir);
    const store = openSqliteStore(dataDir);
    const config = defaultControlPlaneConfig({ dataDir, grpcPort: 0, reportIntervalMs: 100, nodeDeadlineMs: 300 });
    const services = buildServices({ config, store });
    const gateway = new AgentGateway({ config, store: store.nodes, enrollment: services.enrollment, log: silent });
    const port = await gateway.listen();
    try {
      const client = gatewayClient(`127.0.0.1:${port}`);
      const { value } = await services.enrollment.createToken();
      const identity = await enroll(client, value);
      const session = new FakeSession(client, hello(identity.node_id, identity.node_secret));
      await session.next((m) => m.body === 'welcome');
      session.cancel(); // the agent dies
      const node = await eventually(() => store.nodes.getNode(identity.node_id), (n) => n!.status === 'unreachable', 2000);
      expect(node!.status).toBe('unreachable');
    } finally {
      await gateway.close();
      await store.close();
    }
  });
});

describe('commands and restarts', () => {
  it('sends a queued GPU health reset to the agent and records its answer', async () => {
    const plane = await startPlane();
    const { identity, session } = await connectedNode(plane);
    session.send({ telemetry: { sampled_at_ms: Date.now(), gpus: [gpuSample(0), gpuSample(1)] } });
    session.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack');
    await plane.gateway.registry.flush();

    const queued = await plane.services.nodes.requestGpuHealthReset(identity.node_id, 'GPU-00000001');
    expect(queued).toMatchObject({ state: 'pending', args: { gpuUuid: gpuSample(1).uuid } });
    await plane.gateway.pollCommands();
    const command = await session.next((m) => m.body === 'command');
    expect(command.command).toMatchObject({ command_id: queued.id, body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: gpuSample(1).uuid } });
    expect((await plane.services.nodes.getCommand(queued.id)).state).toBe('sent');

    session.send({ command_result: { command_id: queued.id, ok: true } });
    const done = await eventually(() => plane.services.nodes.getCommand(queued.id), (c) => c.state === 'succeeded');
    expect(done.state).toBe('succeeded');
    expect((await plane.store.nodes.listHealthEvents(identity.node_id, 1))[0]).toMatchObject({ kind: 'reset_requested', gpuIndex: 1 });

    await expect(plane.services.nodes.requestGpuHealthReset(identity.node_id, 'GPU-nope')).rejects.toThrow(/has no GPU matching GPU-nope/);
  });

  it('sends other features\' commands and hands their results and task states to hooks', async () => {
    const results: unknown[] = [];
    const tasks: unknown[] = [];
    const plane = await startPlane({
      hooks: { onCommandResult: (node, r) => results.push([node, r.command_id, r.ok]), onTaskState: (node, t) => tasks.push([node, t.task_id, t.state]) },
    });
    const { identity, session } = await connectedNode(plane);
    expect(plane.gateway.send('node_unknown', { command_id: 'x' })).toBe(false);
    expect(plane.gateway.send(identity.node_id, { command_id: 'cmd_start_1', start_task: { task_id: 'inst_1', image: 'busybox' } })).toBe(true);
    const start = await session.next((m) => m.body === 'command');
    expect(start.command).toMatchObject({ command_id: 'cmd_start_1', body: 'start_task', start_task: { task_id: 'inst_1', image: 'busybox' } });
    session.send({ command_result: { command_id: 'cmd_start_1', ok: true } });
    session.send({ task_state: { task_id: 'inst_1', kind: 'INSTANCE', state: 'running' } });
    await eventually(async () => results.length + tasks.length, (n) => n === 2);
    expect(results).toEqual([[identity.node_id, 'cmd_start_1', true]]);
    expect(tasks).toEqual([[identity.node_id, 'inst_1', 'running']]);
  });

  it('tells onNodeConnected when a returning node was last heard of, for billing what ran while it was away', async () => {
    const hellos: Array<number | null> = [];
    const plane = await startPlane({ hooks: { onNodeConnected: (_node, _running, lastContact) => hellos.push(lastContact) } });
    const { client, identity, session } = await connectedNode(plane);
    plane.clock.advance(5_000);
    session.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack');
    const lastHeard = plane.clock.now();
    session.cancel();
    await eventually(async () => plane.gateway.session(identity.node_id), (s) => s === undefined);
    plane.clock.advance(3 * 86_400_000);
    const back = new FakeSession(client, hello(identity.node_id, identity.node_secret));
    await back.next((m) => m.body === 'welcome');
    // First session: never heard of before; the second: the heartbeat 3 days ago.
    expect(hellos).toEqual([null, lastHeard]);
  });

  it('fails a command whose node has no session within the timeout', async () => {
    const plane = await startPlane();
    const { identity, session } = await connectedNode(plane);
    session.cancel();
    await eventually(async () => plane.gateway.session(identity.node_id), (s) => s === undefined);
    const queued = await plane.services.nodes.requestGpuHealthReset(identity.node_id);
    await plane.gateway.pollCommands();
    expect((await plane.services.nodes.getCommand(queued.id)).state).toBe('pending');
    plane.clock.advance(60_001);
    await plane.gateway.pollCommands();
    expect(await plane.services.nodes.getCommand(queued.id)).toMatchObject({ state: 'failed', errorCode: 'node_not_connected' });
  });

  it('after a control-plane restart on the same data dir and port, the agent is the same node', async () => {
    const first = await startPlane();
    const port = Number(first.address.split(':')[1]);
    const { identity, session } = await connectedNode(first);
    await first.close();
    const end = await session.ended;
    expect([grpc.status.OK, grpc.status.UNAVAILABLE, grpc.status.CANCELLED]).toContain(end.code);

    const second = await startPlane({ dataDir: first.dataDir, port, clock: first.clock });
    const client = gatewayClient(second.address);
    const again = new FakeSession(client, hello(identity.node_id, identity.node_secret));
    const welcome = await again.next((m) => m.body === 'welcome');
    expect(welcome.welcome!.node_id).toBe(identity.node_id);
    const nodes = await second.store.nodes.listNodes();
    expect(nodes.map((n) => [n.id, n.status])).toEqual([[identity.node_id, 'ready']]);
  });

  it('a node that was ready before a restart and never returns turns unreachable after the deadline', async () => {
    const first = await startPlane();
    const { identity, session } = await connectedNode(first);
    session.cancel();
    await first.close();
    const second = await startPlane({ dataDir: first.dataDir, clock: first.clock });
    second.clock.advance(DEADLINE_MS + 1);
    expect(await second.gateway.registry.sweep()).toEqual([identity.node_id]);
  });
});

describe('svcctl nodes', () => {
  it('shows GPUs, health and the timeline as JSON, from another process', async () => {
    const plane = await startPlane();
    const { identity, session } = await connectedNode(plane);
    session.send({ telemetry: { sampled_at_ms: Date.now(), gpus: [gpuSample(0), gpuSample(1)] } });
    session.send({ health_event: { gpu_uuid: gpuSample(1).uuid, gpu_index: 1, kind: 'XID', xid: 79, healthy: false, message: 'XID 79', at_ms: 0 } });
    session.send({ host_facts: { hostname: 'gpu-host-1', isolation_warnings: ['pulls_bypass_proxy', 'no_log_limit'] } });
    session.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
    await session.next((m) => m.body === 'ack');
    await plane.gateway.registry.flush();

    const svcctl = fileURLToPath(new URL('../src/cli/svcctl.ts', import.meta.url));
    const run = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', svcctl, '--data-dir', plane.dataDir, ...args], { env: { ...process.env, SVC_LOG_LEVEL: 'silent' } });
    const shown = JSON.parse((await run('nodes', 'show', identity.node_id, '--json')).stdout);
    expect(shown).toMatchObject({ id: identity.node_id, status: 'ready', gpus_total: 2, gpus_healthy: 1 });
    expect(shown.gpus.map((g: { healthy: boolean; health_reason: string }) => [g.healthy, g.health_reason])).toEqual([
      [true, ''],
      [false, 'XID 79'],
    ]);
    expect(shown.timeline.map((e: { kind: string }) => e.kind)).toEqual(['xid', 'node_up']);
    // What the agent said weakens isolation on its host, for the operator to see per node.
    expect(shown.host_facts.isolation_warnings).toEqual(['pulls_bypass_proxy', 'no_log_limit']);
    expect((await run('nodes', 'show', identity.node_id)).stdout).toMatch(/^Isolation pulls_bypass_proxy, no_log_limit$/m);

    const table = (await run('nodes', 'list')).stdout;
    expect(table).toContain(identity.node_id);
    expect(table).toMatch(/1\/2/);
    expect(table).toMatch(/\d+s ago/);

    const cordoned = JSON.parse((await run('nodes', 'cordon', identity.node_id, '--json')).stdout);
    expect(cordoned).toMatchObject({ cordoned: true, schedulable: false });
  }, 30_000);
});
