import { describe, expect, it } from 'vitest';
import { freeCapacity, place, type CandidateNode } from './placement.js';

const H100 = 'NVIDIA H100 80GB HBM3';

function node(id: string, pool: 'na' | 'eu' | 'apac', free: number, options: { total?: number; model?: string; schedulable?: boolean; unhealthy?: number } = {}): CandidateNode {
  const total = options.total ?? 8;
  return {
    id,
    pool,
    schedulable: options.schedulable ?? true,
    gpus: Array.from({ length: total }, (_, i) => ({
      uuid: `GPU-${id}-${i}`,
      model: options.model ?? H100,
      healthy: i >= (options.unhealthy ?? 0),
      claimed: i >= free + (options.unhealthy ?? 0),
    })),
  };
}

describe('place', () => {
  it('keeps whole 8-GPU nodes free by packing partly used nodes first', () => {
    const nodes = [node('a-whole', 'na', 8), node('b-partial', 'na', 3), node('c-partial', 'na', 5)];
    const small = place(nodes, { gpuModel: H100, gpuCount: 2, pools: ['na'] });
    expect(small).toMatchObject({ ok: true, nodeId: 'b-partial' });
    const eight = place(nodes, { gpuModel: H100, gpuCount: 8, pools: ['na'] });
    expect(eight).toMatchObject({ ok: true, nodeId: 'a-whole' });
    if (eight.ok) expect(eight.gpuUuids).toHaveLength(8);
  });

  it.each([
    ['cordoned or unreachable nodes', [node('x', 'na', 8, { schedulable: false })]],
    ['unhealthy GPUs', [node('x', 'na', 2, { unhealthy: 6 })]],
    ['GPUs of another model', [node('x', 'na', 8, { model: 'NVIDIA A100-SXM4-80GB' })]],
    ['claimed GPUs (reservations are never preempted)', [node('x', 'na', 3)]],
  ])('skips %s', (_label, nodes) => {
    const result = place(nodes, { gpuModel: H100, gpuCount: 4, pools: ['na'] });
    expect(result.ok).toBe(false);
  });

  it('falls through pools in the configured order when no pool is pinned', () => {
    const nodes = [node('eu-1', 'eu', 4), node('apac-1', 'apac', 8)];
    expect(place(nodes, { gpuModel: H100, gpuCount: 4, pools: ['na', 'eu', 'apac'] })).toMatchObject({ ok: true, pool: 'eu' });
    expect(place(nodes, { gpuModel: H100, gpuCount: 8, pools: ['na', 'eu', 'apac'] })).toMatchObject({ ok: true, pool: 'apac' });
  });

  it('does not leave a pinned pool', () => {
    const result = place([node('eu-1', 'eu', 8)], { gpuModel: H100, gpuCount: 1, pools: ['na'] });
    expect(result).toEqual({ ok: false, reason: `no node in pool na has 1 free healthy ${H100} GPU(s)` });
  });

  it('gives out only free, healthy GPUs of the node', () => {
    const result = place([node('n', 'na', 2, { unhealthy: 1 })], { gpuModel: H100, gpuCount: 2, pools: ['na'] });
    expect(result).toEqual({ ok: true, nodeId: 'n', pool: 'na', gpuUuids: ['GPU-n-1', 'GPU-n-2'] });
  });

  it.each<[number, string[]]>([
    [0, ['GPU-n-0', 'GPU-n-1']],
    [1, ['GPU-n-1', 'GPU-n-2']],
    [3, ['GPU-n-3', 'GPU-n-0']],
    [6, ['GPU-n-2', 'GPU-n-3']],
  ])('a retry takes turn %d of the same node\'s free GPUs', (turn, expected) => {
    const result = place([node('n', 'na', 4), node('m', 'na', 8)], { gpuModel: H100, gpuCount: 2, pools: ['na'] }, turn);
    expect(result).toEqual({ ok: true, nodeId: 'n', pool: 'na', gpuUuids: expected });
  });
});

describe('freeCapacity', () => {
  it('sums free healthy GPUs per pool and the largest block on one node', () => {
    const nodes = [node('a', 'na', 3), node('b', 'na', 5), node('c', 'eu', 8, { schedulable: false }), node('d', 'eu', 2)];
    expect(freeCapacity(nodes, H100)).toEqual({ na: { free_gpus: 8, largest_block: 5 }, eu: { free_gpus: 2, largest_block: 2 } });
  });
});
