import { describe, expect, it } from 'vitest';
import { fleetView, gpuState } from './fleet-view.js';
import { gpuRecord, instanceRecord, nodeRecord, replicaRecord, snapshot, xidEvent } from './test-fleet.js';

describe('gpuState', () => {
  it.each([
    ['ready', true, true, 'healthy'],
    ['ready', false, true, 'unhealthy'],
    ['ready', true, false, 'unknown'],
    ['unreachable', true, true, 'unknown'],
    ['unreachable', false, true, 'unknown'],
    ['enrolled', true, true, 'unknown'],
  ] as const)('node %s, healthy %s, sampled %s: %s', (status, healthy, sampled, state) => {
    expect(gpuState({ status }, { healthy, sample: sampled ? {} : null })).toBe(state);
  });
});

describe('fleetView', () => {
  const a = nodeRecord('node_a');
  const gpus = [0, 1, 2, 3].map((i) => gpuRecord('node_a', i, i === 2 ? { healthy: false, healthReason: 'XID 79' } : {}));
  const view = fleetView(
    snapshot({
      nodes: [a, nodeRecord('node_b', { pool: 'eu', status: 'unreachable' }), nodeRecord('node_gone', { forgottenAt: 1 })].filter((n) => !n.forgottenAt),
      gpus: [...gpus, gpuRecord('node_b', 0)],
      instances: [instanceRecord('inst_1', 'node_a', ['GPU-node_a-2'], { labels: { team: 'ml' } }), instanceRecord('inst_2', 'node_a', ['GPU-node_a-3'], { orgId: 'org_unknown' })],
      replicas: [replicaRecord('rep_1', 'node_a', { gpuUuids: ['GPU-node_a-0'] })],
      events: [xidEvent(5, 'node_a', 2, 79), { ...xidEvent(6, 'node_b', 0, 0), kind: 'node_down', gpuUuid: null, gpuIndex: null, xid: null, healthy: null }],
      desired: [{ model: 'tiny-chat', quantization: 'int4', pool: 'na', count: 2 }],
    }),
  );

  it('groups nodes by pool with totals: free, used, unhealthy and unknown GPUs, replicas running against desired', () => {
    expect(view.pools.map((p) => p.pool)).toEqual(['eu', 'na']);
    expect(view.pools[1]!.totals).toEqual({ nodes: 1, nodesReady: 1, gpus: 4, gpusFree: 1, gpusUsed: 2, gpusUnhealthy: 1, gpusUnknown: 0, replicasRunning: 1, replicasDesired: 2 });
    expect(view.pools[0]!.totals).toMatchObject({ nodes: 1, nodesReady: 0, gpus: 1, gpusUnknown: 1, gpusFree: 0 });
  });

  it('gives each GPU a square with its state and holder', () => {
    const squares = view.pools[1]!.nodes[0]!.gpus;
    expect(squares.map((s) => [s.index, s.state, s.heldBy])).toEqual([
      [0, 'healthy', 'rep_1'],
      [1, 'healthy', null],
      [2, 'unhealthy', 'inst_1'],
      [3, 'healthy', 'inst_2'],
    ]);
  });

  it('names instances by org (the id when the org is unknown) and replicas as the provider own', () => {
    const workloads = view.pools[1]!.nodes[0]!.workloads;
    expect(workloads.map((w) => [w.id, w.org, w.detail, w.gpuIndexes])).toEqual([
      ['inst_1', 'acme', 'team=ml', [2]],
      ['inst_2', 'org_unknown', '', [3]],
      ['rep_1', null, 'tiny-chat int4', [0]],
    ]);
  });

  it("explains XIDs with NVIDIA's meaning and action, and names who is affected", () => {
    expect(view.timeline.map((e) => [e.seq, e.kind, e.xid, e.meaning, e.action, e.affected])).toEqual([
      [6, 'node_down', null, null, null, []],
      [5, 'xid', 79, 'GPU has fallen off the bus', 'reboot the node', ['inst_1']],
    ]);
    expect(view.pools[1]!.nodes[0]!.timeline.map((e) => e.seq)).toEqual([5]);
  });

  it("counts a cordoned node's idle healthy GPUs as neither free nor used", () => {
    const cordoned = fleetView(snapshot({ nodes: [nodeRecord('n', { cordoned: true })], gpus: [gpuRecord('n', 0)] }));
    expect(cordoned.pools[0]!.totals).toMatchObject({ gpus: 1, gpusFree: 0, gpusUsed: 0 });
    expect(cordoned.pools[0]!.nodes[0]!.status).toContain('cordoned');
  });

  it('lists everything on a node that went down as affected', () => {
    const down = fleetView(
      snapshot({
        nodes: [nodeRecord('n', { status: 'unreachable' })],
        instances: [instanceRecord('inst_x', 'n', [])],
        events: [{ seq: 1, nodeId: 'n', gpuUuid: null, gpuIndex: null, kind: 'node_down', xid: null, healthy: null, message: 'missed its deadline', at: 1 }],
      }),
    );
    expect(down.timeline[0]!.affected).toEqual(['inst_x']);
  });
});
