import { describe, expect, it } from 'vitest';
import type { GpuRecord, NodeRecord } from '../store/node-store.js';
import { candidateNodes, schedulableGpus } from './schedulability.js';

const H100 = 'NVIDIA H100 80GB HBM3';
const node = (id: string, over: Partial<NodeRecord> = {}): NodeRecord => ({
  id,
  hostname: id,
  pool: 'na',
  status: 'ready',
  cordoned: false,
  draining: false,
  hostFacts: null,
  agentVersion: '',
  protocolVersion: 1,
  enrolledAt: 0,
  connectedAt: 0,
  lastSeenAt: 0,
  ...over,
});
const gpu = (nodeId: string, index: number, over: Partial<GpuRecord> = {}): GpuRecord => ({
  uuid: `GPU-${nodeId}-${index}`,
  nodeId,
  index,
  name: H100,
  memoryTotalBytes: 80e9,
  healthy: true,
  healthReason: '',
  sample: null,
  sampledAt: null,
  ...over,
});

describe('schedulableGpus', () => {
  const nodes = [
    node('n-a'),
    node('n-b'),
    node('n-cordoned', { cordoned: true }),
    node('n-draining', { draining: true }),
    node('n-gone', { status: 'unreachable' }),
    node('n-eu', { pool: 'eu' }),
  ];
  const gpus = [
    gpu('n-a', 1),
    gpu('n-a', 0),
    gpu('n-a', 2, { healthy: false, healthReason: 'XID 79' }),
    gpu('n-a', 3, { name: 'NVIDIA L40S' }),
    gpu('n-b', 0),
    gpu('n-b', 1),
    gpu('n-b', 2),
    gpu('n-cordoned', 0),
    gpu('n-draining', 0),
    gpu('n-gone', 0),
    gpu('n-eu', 0),
  ];

  it('lists healthy unclaimed GPUs of the model on schedulable nodes of the pool', () => {
    const claimed = new Set(['GPU-n-b-2']);
    expect(schedulableGpus(candidateNodes(nodes, gpus, claimed), { gpuModel: H100, pool: 'na' })).toEqual([
      { nodeId: 'n-a', pool: 'na', freeGpuUuids: ['GPU-n-a-0', 'GPU-n-a-1'] },
      { nodeId: 'n-b', pool: 'na', freeGpuUuids: ['GPU-n-b-0', 'GPU-n-b-1'] },
    ]);
  });

  it('orders by free GPUs, spans pools without a pool, and drops nodes with none free', () => {
    const result = schedulableGpus(candidateNodes(nodes, gpus, new Set()), { gpuModel: H100 });
    expect(result.map((n) => [n.nodeId, n.freeGpuUuids.length])).toEqual([
      ['n-b', 3],
      ['n-a', 2],
      ['n-eu', 1],
    ]);
    expect(schedulableGpus(candidateNodes(nodes, gpus, new Set()), { gpuModel: 'NVIDIA A100-SXM4-80GB' })).toEqual([]);
  });

  it('gives placement the facts of every node, flagged', () => {
    const facts = candidateNodes(nodes, gpus, new Set(['GPU-n-a-0']));
    const a = facts.find((n) => n.id === 'n-a')!;
    expect(a.schedulable).toBe(true);
    expect(a.gpus.map((g) => [g.uuid, g.healthy, g.claimed])).toEqual([
      ['GPU-n-a-0', true, true],
      ['GPU-n-a-1', true, false],
      ['GPU-n-a-2', false, false],
      ['GPU-n-a-3', true, false],
    ]);
    expect(facts.find((n) => n.id === 'n-gone')!.schedulable).toBe(false);
  });
});
