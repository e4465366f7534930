// The remediation loop against a real SQLite store, ticked by hand: what each fault opens,
// that every step is one commit, and that a restarted control plane (a new Remediator on
// the same file) resumes without repeating a step.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import type { HealthEventRecord } from '../store/node-store.js';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import { DEFAULT_KIND_BY_ACTION } from './remediation-policy.js';
import { Remediator } from './remediator.js';

let dir: string;
let store: SqliteStore;
let now = 1_000_000;
const clock = { now: () => now };
const GPU = 'GPU-1';

const remediator = (autoReset = true) =>
  new Remediator({
    nodes: store.nodes,
    instances: store.instances,
    remediations: store.remediations,
    clock,
    policy: { kindByAction: DEFAULT_KIND_BY_ACTION, autoReset },
    log: createLogger('silent', 'test'),
  });

const event = (over: Partial<HealthEventRecord>): HealthEventRecord => ({
  nodeId: 'node_1',
  gpuUuid: GPU,
  gpuIndex: 1,
  kind: 'xid',
  xid: 48,
  healthy: false,
  message: 'XID 48: double-bit ECC error; recommended action: reset the GPU (RESET_GPU)',
  at: now,
  ...over,
});

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-remediator-'));
  store = openSqliteStore(dir);
  await store.nodes.createToken({ id: 't', hash: Buffer.from('t'), pool: null, createdAt: 0, expiresAt: 10 ** 12, usedAt: null, usedByNode: null, revokedAt: null });
  await store.nodes.enroll(Buffer.from('t'), 1, {
    id: 'node_1', hostname: 'h1', pool: 'na', status: 'ready', cordoned: false, draining: false, hostFacts: null,
    agentVersion: '', protocolVersion: 4, enrolledAt: 0, connectedAt: 0, lastSeenAt: 0,
  }, Buffer.from('s'));
  await store.nodes.flushTelemetry([{ nodeId: 'node_1', lastSeenAt: now, gpus: [{ uuid: GPU, index: 1, name: 'H100', memoryTotalBytes: null, healthy: true, healthReason: '', sample: null, sampledAt: now }] }]);
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const remediationRows = async () => (await store.nodes.listHealthEvents('node_1', 100)).filter((e) => e.kind === 'remediation').reverse().map((e) => e.message);

describe('Remediator', () => {
  it('XID 13 opens nothing; the cursor moves past it', async () => {
    const r = remediator();
    const seen = await store.nodes.recordHealthEvent(event({ xid: 13, healthy: true, message: 'XID 13: graphics engine exception' }));
    await r.tick();
    expect(await store.remediations.cursor()).toBe(seen.seq);
    expect(await store.remediations.list({ limit: 10 })).toEqual([]);
    expect(await remediationRows()).toEqual([]);
  });

  it('XID 48 on an idle GPU: reset command once, closed when the GPU reads healthy; a restart in between repeats nothing', async () => {
    await store.nodes.recordHealthEvent(event({}));
    await remediator().tick(); // opens, then steps: idle -> reset
    const [open] = await store.remediations.listOpen();
    expect(open).toMatchObject({ kind: 'reset_gpu', stage: 'resetting', xid: 48, action: 'RESET_GPU' });
    const commands = await store.nodes.listCommands({ nodeId: 'node_1' });
    expect(commands).toEqual([expect.objectContaining({ id: open!.commandId, kind: 'reset_gpu', args: { gpuUuid: GPU }, state: 'pending' })]);

    // "Restart": a new loop on the same store finds the reset in flight and sends no second one.
    const restarted = remediator();
    await restarted.tick();
    await restarted.tick();
    expect(await store.nodes.listCommands({ nodeId: 'node_1' })).toHaveLength(1);

    await store.nodes.finishCommand(open!.commandId!, true, now, null);
    await restarted.tick(); // succeeded, but the store does not have the GPU healthy yet
    expect((await store.remediations.listOpen())[0]?.stage).toBe('resetting');
    await store.nodes.recordHealthEvent(event({ kind: 'recovered', xid: null, healthy: true, message: 'GPU reset (nvidia-smi --gpu-reset)' }));
    await restarted.tick();
    expect(await store.remediations.listOpen()).toEqual([]);
    expect((await store.remediations.list({ gpuUuid: GPU, limit: 1 }))[0]).toMatchObject({ stage: 'closed', outcome: 'returned_to_service' });
    expect(await remediationRows()).toEqual([
      'remediation: XID 48: double-bit ECC error -> reset the GPU (RESET_GPU); GPU drained from placement; it is reset once no workload holds it; no instance affected',
      `remediation: no workload holds the GPU: resetting it (${open!.commandId})`,
      'remediation: the GPU reads healthy after the reset; GPU back in service',
    ]);
  });

  it('a backlog of thousands of rows is read in one pass: one remediation per GPU, the cursor at the end', async () => {
    // A first start on a fleet's history: XID 13s (timeline only) with two reset-class
    // faults on one GPU in the middle of the same batch and one on another GPU at the end.
    const OTHER = 'GPU-2';
    await store.nodes.flushTelemetry([{ nodeId: 'node_1', lastSeenAt: now, gpus: [{ uuid: OTHER, index: 2, name: 'H100', memoryTotalBytes: null, healthy: true, healthReason: '', sample: null, sampledAt: now }] }]);
    let last = 0;
    for (let i = 0; i < 2600; i++) {
      const fault = i === 1200 || i === 1201;
      const row = fault ? event({}) : i === 2599 ? event({ gpuUuid: OTHER, gpuIndex: 2 }) : event({ xid: 13, healthy: true, message: 'XID 13: graphics engine exception' });
      last = (await store.nodes.recordHealthEvent(row)).seq;
    }
    await remediator().tick();
    expect(await store.remediations.cursor()).toBeGreaterThanOrEqual(last);
    // One remediation per GPU (the second fault on GPU-1 joined the first, in the same batch).
    const opened = await store.remediations.list({ limit: 10 });
    expect(opened.map((r) => r.gpuUuid).sort()).toEqual([GPU, OTHER]);
  });

  it('a second fault on the same GPU joins the open remediation; XID 79 escalates it and cordons the node', async () => {
    await store.nodes.claimGpus('node_1', [GPU], 'inst_1', now);
    await store.nodes.recordHealthEvent(event({}));
    await store.nodes.recordHealthEvent(event({ xid: 95, message: 'XID 95: uncontained memory error; recommended action: reset the GPU (RESET_GPU)' }));
    const r = remediator();
    await r.tick();
    expect(await store.remediations.listOpen()).toEqual([expect.objectContaining({ xid: 48, stage: 'waiting_idle', holders: ['inst_1'] })]);
    await store.nodes.recordHealthEvent(event({ xid: 79, message: 'XID 79: GPU has fallen off the bus; recommended action: reboot the node (RESTART_BM)' }));
    await r.tick();
    expect(await store.remediations.listOpen()).toEqual([expect.objectContaining({ xid: 79, kind: 'reboot_node', stage: 'node_drained' })]);
    expect(await store.nodes.getNode('node_1')).toMatchObject({ cordoned: true, draining: true });
    await store.nodes.setFlags('node_1', { cordoned: false, draining: false });
    await r.tick();
    expect((await store.remediations.list({ limit: 1 }))[0]).toMatchObject({ stage: 'closed', outcome: 'node_returned' });
  });

  it('with automatic reset off, a reset-class GPU stays drained until it reads healthy', async () => {
    await store.nodes.recordHealthEvent(event({ kind: 'ecc_uncorrectable', xid: null, message: '2 new uncorrectable ECC errors' }));
    const r = remediator(false);
    await r.tick();
    await r.tick();
    expect(await store.remediations.listOpen()).toEqual([expect.objectContaining({ kind: 'reset_gpu', stage: 'held', xid: null, action: 'RESET_GPU' })]);
    expect(await store.nodes.listCommands({ nodeId: 'node_1' })).toEqual([]);
  });
});
