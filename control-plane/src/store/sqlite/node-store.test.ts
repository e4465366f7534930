import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EnrollmentTokenRecord, NodeRecord } from '../node-store.js';
import { openSqliteStore, type SqliteStore } from './sqlite-store.js';

let dir: string;
let store: SqliteStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-nodestore-'));
  store = openSqliteStore(dir);
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const token = (id: string, hash: string, over: Partial<EnrollmentTokenRecord> = {}): EnrollmentTokenRecord => ({
  id,
  hash: Buffer.from(hash),
  pool: null,
  createdAt: 0,
  expiresAt: 1000,
  usedAt: null,
  usedByNode: null,
  revokedAt: null,
  ...over,
});
const node = (id: string): NodeRecord => ({
  id,
  hostname: id,
  pool: 'na',
  status: 'enrolled',
  cordoned: false,
  draining: false,
  hostFacts: null,
  agentVersion: '',
  protocolVersion: 1,
  enrolledAt: 0,
  connectedAt: null,
  lastSeenAt: null,
});

describe('SqliteNodeStore', () => {
  it('uses a token once, atomically with the node insert', async () => {
    await store.nodes.createToken(token('ntk_a', 'a'));
    expect(await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'))).toEqual({ enrolled: true });
    const second = await store.nodes.enroll(Buffer.from('a'), 11, node('node_2'), Buffer.from('s'));
    expect(second).toMatchObject({ enrolled: false, token: { id: 'ntk_a', usedAt: 10, usedByNode: 'node_1' } });
    expect((await store.nodes.listNodes()).map((n) => n.id)).toEqual(['node_1']);
    // Revoking a used token changes nothing.
    expect((await store.nodes.revokeToken('ntk_a', 20))!.revokedAt).toBeNull();
  });

  it('refuses expired and revoked tokens', async () => {
    await store.nodes.createToken(token('ntk_e', 'e'));
    await store.nodes.createToken(token('ntk_r', 'r'));
    await store.nodes.revokeToken('ntk_r', 5);
    expect((await store.nodes.enroll(Buffer.from('e'), 1000, node('node_1'), Buffer.from('s'))).enrolled).toBe(false);
    expect((await store.nodes.enroll(Buffer.from('r'), 10, node('node_2'), Buffer.from('s'))).enrolled).toBe(false);
    expect(await store.nodes.listNodes()).toEqual([]);
  });

  it('flushes samples, prunes vanished GPUs and keeps health events in order', async () => {
    await store.nodes.createToken(token('ntk_a', 'a'));
    await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
    const gpu = (uuid: string, index: number) => ({
      uuid,
      index,
      name: 'NVIDIA L40S',
      memoryTotalBytes: 48e9,
      healthy: true,
      healthReason: '',
      sample: { utilization_gpu_percent: 5 },
      sampledAt: 100,
    });
    await store.nodes.flushTelemetry([{ nodeId: 'node_1', lastSeenAt: 100, gpus: [gpu('GPU-a', 0), gpu('GPU-b', 1)] }]);
    expect((await store.nodes.getNode('node_1'))!.lastSeenAt).toBe(100);
    await store.nodes.pruneGpus('node_1', ['GPU-b']);
    expect((await store.nodes.listGpus('node_1')).map((g) => g.uuid)).toEqual(['GPU-b']);

    await store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid: 'GPU-b', gpuIndex: 1, kind: 'thermal', xid: null, healthy: false, message: 'too hot: 95 C', at: 200 });
    await store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid: null, gpuIndex: null, kind: 'node_down', xid: null, healthy: null, message: 'silent', at: 300 });
    expect((await store.nodes.listGpus('node_1'))[0]).toMatchObject({ healthy: false, healthReason: 'too hot: 95 C' });
    expect((await store.nodes.listHealthEvents('node_1', 10)).map((e) => e.kind)).toEqual(['node_down', 'thermal']);
  });

  it('knows the latest XID of every GPU (DCGM_FI_DEV_XID_ERRORS)', async () => {
    await store.nodes.createToken(token('ntk_a', 'a'));
    await store.nodes.enroll(Buffer.from('a'), 10, node('node_1'), Buffer.from('s'));
    const xid = (gpuUuid: string, n: number, at: number) =>
      store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid, gpuIndex: 0, kind: 'xid', xid: n, healthy: n === 13, message: `XID ${n}`, at });
    expect(await store.nodes.lastXidByGpu()).toEqual(new Map());
    await xid('GPU-a', 79, 1);
    await xid('GPU-b', 13, 2);
    await xid('GPU-a', 48, 3);
    await store.nodes.recordHealthEvent({ nodeId: 'node_1', gpuUuid: 'GPU-a', gpuIndex: 0, kind: 'recovered', xid: null, healthy: true, message: 'reset', at: 4 });
    expect(await store.nodes.lastXidByGpu()).toEqual(new Map([['GPU-a', 48], ['GPU-b', 13]]));
  });

  it('claims GPUs all or nothing and releases them by owner', async () => {
    expect(await store.nodes.claimGpus('node_1', ['GPU-a', 'GPU-b'], 'inst_1', 1)).toBe(true);
    expect(await store.nodes.claimGpus('node_1', ['GPU-c', 'GPU-b'], 'inst_2', 2)).toBe(false);
    expect((await store.nodes.listClaims()).map((c) => [c.gpuUuid, c.owner])).toEqual([
      ['GPU-a', 'inst_1'],
      ['GPU-b', 'inst_1'],
    ]);
    expect(await store.nodes.releaseClaims('inst_1')).toBe(2);
    expect(await store.nodes.claimGpus('node_1', ['GPU-c', 'GPU-b'], 'inst_2', 3)).toBe(true);
  });
});
