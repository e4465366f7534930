import { describe, expect, it } from 'vitest';
import { availability, modelStatus, overallStatus, publicStatus } from './public-status.js';
import type { FleetSnapshot } from './fleet-read.js';
import { gpuRecord, H100, instanceRecord, nodeRecord, replicaRecord, snapshot } from './test-fleet.js';

const SKUS = [
  { id: 'h100-80gb', gpu_model: H100 },
  { id: 'a100-80gb', gpu_model: 'NVIDIA A100-SXM4-80GB' },
];

describe('public status rules', () => {
  it.each([
    [0, 'none'],
    [1, 'limited'],
    [7, 'limited'],
    [8, 'available'],
    [64, 'available'],
  ] as const)('%i free GPUs: %s', (free, level) => expect(availability(free)).toBe(level));

  it.each([
    [0, 0, 'down'],
    [1, 0, 'up'],
    [0, 2, 'down'],
    [1, 2, 'degraded'],
    [2, 2, 'up'],
    [3, 2, 'up'],
  ] as const)('model with %i ready of %i desired: %s', (ready, desired, status) => expect(modelStatus(ready, desired)).toBe(status));

  it.each([
    [[], 'up'],
    [['up', 'up'], 'up'],
    [['up', 'degraded'], 'degraded'],
    [['up', 'down'], 'degraded'],
    [['down', 'down'], 'down'],
  ] as const)('pools %j: the API is %s', (pools, status) => expect(overallStatus(pools)).toBe(status));
});

describe('publicStatus', () => {
  const gpus = Array.from({ length: 8 }, (_, i) => gpuRecord('a', i));
  const healthy = snapshot({ nodes: [nodeRecord('a')], gpus, replicas: [replicaRecord('r1', 'a')], desired: [{ model: 'tiny-chat', quantization: 'int4', pool: 'na', count: 1 }] });

  it('is up with every GPU healthy and every replica running; capacity only for SKUs the pool has', () => {
    expect(publicStatus(healthy, SKUS)).toEqual({
      status: 'up',
      generated_at: '2026-11-24T06:00:00.000Z',
      pools: [
        {
          pool: 'na',
          status: 'up',
          notes: [],
          models: [{ model: 'tiny-chat', status: 'up', replicas_ready: 1, replicas_desired: 1 }],
          capacity: [{ sku: 'h100-80gb', gpu_model: H100, availability: 'available' }],
        },
      ],
    });
  });

  it.each([
    ['an unhealthy GPU', { gpus: gpus.map((g, i) => (i === 0 ? { ...g, healthy: false } : g)) }, 'degraded', 'limited'],
    ['an instance on one GPU', { instances: [instanceRecord('i', 'a', [gpus[0]!.uuid])] }, 'up', 'limited'],
    ['the node cordoned', { nodes: [nodeRecord('a', { cordoned: true })] }, 'up', 'none'],
    ['the node unreachable', { nodes: [nodeRecord('a', { status: 'unreachable' })] }, 'down', 'none'],
    ['the replica not running', { replicas: [replicaRecord('r1', 'a', { status: 'restarting' })] }, 'degraded', 'available'],
    ['the node unreachable and the replica lost', { nodes: [nodeRecord('a', { status: 'unreachable' })], replicas: [] }, 'down', 'none'],
  ] as const)('with %s the pool is %s and capacity %s', (_case, patch, status, level) => {
    const pool = publicStatus({ ...healthy, ...(patch as Partial<FleetSnapshot>) }, SKUS).pools[0]!;
    expect(pool.status).toBe(status);
    expect(pool.capacity[0]!.availability).toBe(level);
    if (status !== 'up') expect(pool.notes.length).toBeGreaterThan(0);
  });

  it('lists a pool that has only desired replicas, as down, and a model short of replicas as degraded', () => {
    const status = publicStatus(
      { ...healthy, desired: [{ model: 'tiny-chat', quantization: 'int4', pool: 'na', count: 2 }, { model: 'tiny-embed', quantization: 'int4', pool: 'eu', count: 1 }] },
      SKUS,
    );
    expect(status.pools.map((p) => [p.pool, p.status, p.models.map((m) => m.status)])).toEqual([
      ['eu', 'down', ['down']],
      ['na', 'degraded', ['degraded']],
    ]);
    expect(status.status).toBe('degraded');
  });

  it('says nothing about nodes, GPUs, orgs, instances or replica endpoints', () => {
    const text = JSON.stringify(publicStatus({ ...healthy, instances: [instanceRecord('inst_secret', 'a', [gpus[1]!.uuid], { labels: { x: 'label-secret' } })] }, SKUS));
    for (const secret of ['a-host', '"a"', 'GPU-a-', 'org_a', 'acme', 'inst_secret', 'label-secret', 'r1', '10.0.0.7']) expect(text).not.toContain(secret);
  });
});
