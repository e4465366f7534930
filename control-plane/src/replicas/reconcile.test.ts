import { describe, expect, it } from 'vitest';
import { reconcileReplicas, type ActualReplica, type ReplicaNode, type ReplicaTarget } from './reconcile.js';

const node = (id: string, over: Partial<ReplicaNode> = {}): ReplicaNode => ({ id, pool: 'na', reachable: true, cordoned: false, draining: false, gpus: [], ...over });
const gpuNode = (id: string, uuids: string[], over: Partial<ReplicaNode> = {}) =>
  node(id, { gpus: uuids.map((uuid) => ({ uuid, healthy: true, claimed: false })), ...over });
const chat = (count: number, over: Partial<ReplicaTarget> = {}): ReplicaTarget => ({ model: 'tiny-chat', quantization: 'int4', pool: 'na', count, gpus: 0, ...over });
const llama = (count: number): ReplicaTarget => ({ model: 'llama', quantization: 'fp16', pool: 'na', count, gpus: 2 });
let seq = 0;
const replica = (nodeId: string, over: Partial<ActualReplica> = {}): ActualReplica => ({
  id: `rep_${++seq}`,
  model: 'tiny-chat',
  quantization: 'int4',
  pool: 'na',
  nodeId,
  gpuUuids: [],
  status: 'running',
  createdAt: seq,
  ...over,
});

describe('reconcileReplicas', () => {
  it('starts what is missing, spread across the nodes of the pool', () => {
    const plan = reconcileReplicas([chat(3)], [], [node('n1'), node('n2'), node('eu1', { pool: 'eu' })]);
    expect(plan.actions.map((a) => a.kind === 'start' && a.nodeId)).toEqual(['n1', 'n2', 'n1']);
    expect(plan.shortfalls).toEqual([]);
  });

  it('spreads onto the node that has none of this target yet', () => {
    const existing = replica('n1');
    const plan = reconcileReplicas([chat(2)], [existing], [node('n1'), node('n2')]);
    expect(plan.actions).toEqual([{ kind: 'start', model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId: 'n2', gpuUuids: [] }]);
  });

  it('does nothing when desired and actual agree', () => {
    expect(reconcileReplicas([chat(1)], [replica('n1')], [node('n1')])).toEqual({ actions: [], shortfalls: [] });
  });

  it('never places on cordoned, draining or unreachable nodes, and says why when nothing fits', () => {
    const nodes = [node('c', { cordoned: true }), node('d', { draining: true }), node('u', { reachable: false })];
    const plan = reconcileReplicas([chat(2)], [], nodes);
    expect(plan.actions).toEqual([]);
    expect(plan.shortfalls).toEqual([{ model: 'tiny-chat', quantization: 'int4', pool: 'na', missing: 2, reason: 'no reachable, schedulable node in pool na' }]);
  });

  it('keeps replicas running on a cordoned node', () => {
    expect(reconcileReplicas([chat(1)], [replica('c')], [node('c', { cordoned: true })]).actions).toEqual([]);
  });

  it('places vLLM replicas on free healthy GPUs, best fit, and never on claimed ones', () => {
    const nodes = [
      gpuNode('big', ['b1', 'b2', 'b3', 'b4']),
      node('small', { gpus: [{ uuid: 's1', healthy: true, claimed: false }, { uuid: 's2', healthy: true, claimed: false }, { uuid: 's3', healthy: true, claimed: true }] }),
      node('sick', { gpus: [{ uuid: 'x1', healthy: false, claimed: false }, { uuid: 'x2', healthy: true, claimed: false }] }),
    ];
    const plan = reconcileReplicas([llama(3)], [], nodes);
    expect(plan.actions).toMatchObject([
      { kind: 'start', nodeId: 'small', gpuUuids: ['s1', 's2'] },
      { kind: 'start', nodeId: 'big', gpuUuids: ['b1', 'b2'] },
      { kind: 'start', nodeId: 'big', gpuUuids: ['b3', 'b4'] },
    ]);
    expect(reconcileReplicas([llama(4)], [], nodes).shortfalls).toEqual([
      { model: 'llama', quantization: 'fp16', pool: 'na', missing: 1, reason: 'no node in pool na has 2 free healthy GPU(s)' },
    ]);
  });

  it('stops surplus replicas, those not serving first, then the newest', () => {
    const running = replica('n1');
    const newer = replica('n2');
    const restarting = replica('n3', { status: 'restarting' });
    const plan = reconcileReplicas([chat(1)], [running, newer, restarting], [node('n1'), node('n2'), node('n3')]);
    expect(plan.actions).toEqual([
      { kind: 'stop', replicaId: newer.id, reason: 'surplus: 1 desired for tiny-chat:int4:na' },
      { kind: 'stop', replicaId: restarting.id, reason: 'surplus: 1 desired for tiny-chat:int4:na' },
    ]);
  });

  it('keeps the spread when it stops surplus replicas', () => {
    const a = replica('n1');
    const b = replica('n2');
    const c = replica('n1');
    expect(reconcileReplicas([chat(2)], [a, b, c], [node('n1'), node('n2')]).actions).toEqual([
      { kind: 'stop', replicaId: c.id, reason: 'surplus: 2 desired for tiny-chat:int4:na' },
    ]);
  });

  it('stops every replica of a target that is no longer desired (or desired 0 times)', () => {
    const a = replica('n1');
    const b = replica('n1', { model: 'tiny-embed' });
    const plan = reconcileReplicas([chat(0)], [a, b], [node('n1')]);
    expect(plan.actions).toEqual([
      { kind: 'stop', replicaId: a.id, reason: 'tiny-chat:int4:na is no longer desired' },
      { kind: 'stop', replicaId: b.id, reason: 'tiny-embed:int4:na is no longer desired' },
    ]);
  });

  it('loses replicas of unreachable or vanished nodes and places replacements elsewhere', () => {
    const onLost = replica('gone');
    const onSilent = replica('silent');
    const plan = reconcileReplicas([chat(2)], [onLost, onSilent], [node('silent', { reachable: false }), node('n1')]);
    expect(plan.actions).toEqual([
      { kind: 'lose', replicaId: onLost.id, reason: 'node gone is no longer registered' },
      { kind: 'lose', replicaId: onSilent.id, reason: 'node silent is unreachable' },
      { kind: 'start', model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId: 'n1', gpuUuids: [] },
      { kind: 'start', model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId: 'n1', gpuUuids: [] },
    ]);
  });

  it('leaves replicas that are being stopped alone and does not count them', () => {
    const stopping = replica('n1', { status: 'stopping' });
    const plan = reconcileReplicas([chat(1)], [stopping], [node('n1'), node('n2')]);
    // The replacement avoids the node that still holds the stopping replica.
    expect(plan.actions).toEqual([{ kind: 'start', model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId: 'n2', gpuUuids: [] }]);
  });

  it('moves a replica off a draining node: replacement first, the old one stops once the replacement serves', () => {
    const old = replica('d');
    const nodes = [node('d', { draining: true }), node('n1')];
    const first = reconcileReplicas([chat(1)], [old], nodes);
    expect(first.actions).toEqual([{ kind: 'start', model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId: 'n1', gpuUuids: [] }]);
    const replacement = replica('n1', { status: 'starting' });
    expect(reconcileReplicas([chat(1)], [old, replacement], nodes).actions).toEqual([]);
    expect(reconcileReplicas([chat(1)], [old, { ...replacement, status: 'running' }], nodes).actions).toEqual([
      { kind: 'stop', replicaId: old.id, reason: 'node d is draining' },
    ]);
  });

  it('replaces a replica started without an API key: the replacement first, then the old one stops', () => {
    const old = replica('n1', { keyless: true });
    const nodes = [node('n1')];
    expect(reconcileReplicas([chat(1)], [old], nodes).actions).toEqual([{ kind: 'start', model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId: 'n1', gpuUuids: [] }]);
    const replacement = replica('n1', { status: 'starting' });
    expect(reconcileReplicas([chat(1)], [old, replacement], nodes).actions).toEqual([]);
    expect(reconcileReplicas([chat(1)], [old, { ...replacement, status: 'running' }], nodes).actions).toEqual([
      { kind: 'stop', replicaId: old.id, reason: `replica ${old.id} was started without an API key` },
    ]);
  });

  it('stops a draining replica at once when no replacement can be placed', () => {
    const old = replica('d');
    const plan = reconcileReplicas([chat(1)], [old], [node('d', { draining: true })]);
    expect(plan.actions).toEqual([{ kind: 'stop', replicaId: old.id, reason: 'node d is draining' }]);
    expect(plan.shortfalls).toHaveLength(1);
  });

  it('moves a vLLM replica whose GPU turned unhealthy', () => {
    const sick = replica('g1', { model: 'llama', quantization: 'fp16', gpuUuids: ['a', 'b'] });
    const nodes = [
      node('g1', { gpus: [{ uuid: 'a', healthy: false, claimed: true }, { uuid: 'b', healthy: true, claimed: true }] }),
      gpuNode('g2', ['c', 'd']),
    ];
    expect(reconcileReplicas([llama(1)], [sick], nodes).actions).toMatchObject([{ kind: 'start', nodeId: 'g2', gpuUuids: ['c', 'd'] }]);
  });
});
