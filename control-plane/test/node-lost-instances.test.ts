// An instance failed as "node lost before ready" whose node turns out to run it: the node
// missed its deadline on a stream that stayed open (the sweep failed the instance, refunded
// it and freed its GPUs), then spoke again on the same stream and reported the container
// running. Nothing had stopped it: it ran unbilled, on the GPU the next tenant was given.
// Over real gRPC on loopback, against the in-test fake agent.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { AgentGateway } from '../src/agents/gateway.js';
import { buildServices, type Services } from '../src/app.js';
import { defaultControlPlaneConfig } from '../src/config.js';
import { instanceGatewayHooks } from '../src/instances/gateway-hooks.js';
import { openSqliteStore, type SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { FakeSession, enroll, gatewayClient, gpuSample, hello } from './fake-agent.js';
import { tempDataDir } from './harness.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const DEADLINE_MS = 3_000;
let dataDir: string;
let store: SqliteStore;
let services: Services;
let gateway: AgentGateway;
let clock: ManualClock;
let address: string;

beforeAll(async () => {
  dataDir = tempDataDir();
  clock = new ManualClock(Date.now());
  const config = defaultControlPlaneConfig({ dataDir, grpcPort: 0, reportIntervalMs: 1_000, nodeDeadlineMs: DEADLINE_MS, logLevel: 'silent' });
  store = openSqliteStore(dataDir);
  services = buildServices({ config, store, clock });
  gateway = new AgentGateway({ config, store: store.nodes, enrollment: services.enrollment, log: silent, clock, ...instanceGatewayHooks(services.instances, silent) });
  services.taskDispatcher.attach((nodeId, command) => gateway.send(nodeId, command));
  address = `127.0.0.1:${await gateway.listen()}`;
});

afterAll(async () => {
  await gateway?.close();
  await store?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('an instance its node was lost before it was ready', () => {
  it('is killed on its node when the node reports it running after all, before its GPU serves another tenant', async () => {
    const client = gatewayClient(address);
    const token = await services.enrollment.createToken({ pool: 'na' });
    const identity = await enroll(client, token.value);
    const session = new FakeSession(client, hello(identity.node_id, identity.node_secret));
    try {
      await session.next((m) => m.body === 'welcome');
      session.send({ telemetry: { sampled_at_ms: Date.now(), gpus: [gpuSample(0)] } });
      session.send({ heartbeat: { seq: 1, sent_at_ms: 0 } });
      await session.next((m) => m.body === 'ack');
      await gateway.registry.flush();

      const tenantA = await services.orgs.create('tenant-a');
      const a = await services.instances.create(tenantA.id, null, { sku: 'h100-80gb', gpus: 1, pool: 'na' });
      const startA = await session.next((m) => m.command?.start_task?.task_id === a.id);
      session.send({ task_state: { task_id: a.id, kind: 'INSTANCE', state: 'pulling', pull_progress: 0.1 } });
      await expect.poll(async () => (await store.instances.get(a.id))!.status).toBe('starting');

      // Silent past the deadline, its stream still open: failed, refunded, its GPU free.
      clock.advance(DEADLINE_MS + 1);
      expect(await gateway.registry.sweep()).toEqual([identity.node_id]);
      await expect.poll(async () => (await store.instances.get(a.id))!.status).toBe('failed');
      expect(await store.instances.claimedGpuUuids()).toEqual(new Set());

      // The same stream speaks again: the container runs after all.
      session.send({ task_state: { task_id: a.id, kind: 'INSTANCE', state: 'running', at_ms: clock.now() } });
      const kill = await session.next((m) => m.command?.stop_task?.task_id === a.id);
      expect(kill.command!.stop_task).toMatchObject({ task_id: a.id, force: true });
      expect((await store.instances.get(a.id))!.status).toBe('failed');
      expect(startA.command!.start_task!.gpu_uuids).toEqual([gpuSample(0).uuid]);
    } finally {
      session.cancel();
    }
  });
});
