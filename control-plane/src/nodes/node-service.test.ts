import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import { EnrollmentService } from './enrollment-service.js';
import { NodeService } from './node-service.js';

let dir: string;
let store: SqliteStore;
let nodes: NodeService;
let enrollment: EnrollmentService;
const clock = new ManualClock();
const H100 = 'NVIDIA H100 80GB HBM3';

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-nodeservice-'));
  store = openSqliteStore(dir);
  nodes = new NodeService(store.nodes, clock);
  enrollment = new EnrollmentService(store.nodes, clock, 3600);
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

async function readyNode(hostname: string, gpuCount: number): Promise<string> {
  const { value } = await enrollment.createToken({ pool: 'na' });
  const { node } = await enrollment.enroll({ token: value, hostname, pool: 'na', protocolVersion: 1 });
  await store.nodes.updateSession(node.id, { hostname, agentVersion: 't', protocolVersion: 1, status: 'ready', connectedAt: 1, lastSeenAt: 1 }, null);
  await store.nodes.flushTelemetry([
    {
      nodeId: node.id,
      lastSeenAt: 1,
      gpus: Array.from({ length: gpuCount }, (_, index) => ({
        uuid: `GPU-${hostname}-${index}`,
        index,
        name: H100,
        memoryTotalBytes: null,
        healthy: true,
        healthReason: '',
        sample: null,
        sampledAt: 1,
      })),
    },
  ]);
  return node.id;
}

describe('NodeService', () => {
  it('resolves a node by id or unique hostname, and says when a hostname is ambiguous', async () => {
    const a = await readyNode('gpu-a', 1);
    expect((await nodes.resolve(a)).id).toBe(a);
    expect((await nodes.resolve('gpu-a')).id).toBe(a);
    await expect(nodes.resolve('gpu-zzz')).rejects.toThrow('no node with id or hostname gpu-zzz');
    await readyNode('gpu-a', 1);
    await expect(nodes.resolve('gpu-a')).rejects.toThrow(/2 nodes have hostname gpu-a/);
  });

  it('cordon, drain and uncordon take nodes out of and back into the schedulable set', async () => {
    const a = await readyNode('gpu-a', 2);
    const b = await readyNode('gpu-b', 1);
    const free = async () => (await nodes.schedulable({ gpuModel: H100, pool: 'na' })).map((n) => n.nodeId);
    expect(await free()).toEqual([a, b]);
    expect(await nodes.cordon('gpu-a')).toMatchObject({ cordoned: true, draining: false });
    expect(await free()).toEqual([b]);
    expect(await nodes.drain(b)).toMatchObject({ cordoned: true, draining: true });
    expect(await free()).toEqual([]);
    expect(await nodes.uncordon(b)).toMatchObject({ cordoned: false, draining: false });
    expect(await free()).toEqual([b]);
  });

  it('claimed GPUs are not free', async () => {
    const a = await readyNode('gpu-a', 2);
    expect(await store.nodes.claimGpus(a, ['GPU-gpu-a-0'], 'inst_1', 1)).toBe(true);
    expect(await nodes.schedulable({ gpuModel: H100 })).toEqual([{ nodeId: a, pool: 'na', freeGpuUuids: ['GPU-gpu-a-1'] }]);
  });

  it('queues a GPU health reset for a GPU given by index, or for all', async () => {
    const a = await readyNode('gpu-a', 2);
    expect((await nodes.requestGpuHealthReset('gpu-a', '1')).args.gpuUuid).toBe('GPU-gpu-a-1');
    expect((await nodes.requestGpuHealthReset(a)).args.gpuUuid).toBe('');
    expect((await store.nodes.listCommands({ state: 'pending' })).length).toBe(2);
  });
});
