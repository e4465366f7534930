// The public, key-less status: per pool, whether the API serves (up / degraded / down),
// models with replicas ready against desired, and capacity per GPU SKU in coarse bands.
// Deliberately absent: node names and ids, addresses, GPU UUIDs, org names, instance ids
// and exact GPU counts; a competitor or an attacker learns the shape of the service,
// not the fleet.
import { toRfc3339 } from '@svc/shared';
import type { FleetSnapshot } from './fleet-read.js';
import { gpuState } from './fleet-view.js';

export type ServiceStatus = 'up' | 'degraded' | 'down';
/** Free GPUs of a SKU in a pool: none, fewer than one whole 8-GPU node, or at least one. */
export type Availability = 'none' | 'limited' | 'available';

export interface PublicModelStatus {
  model: string;
  status: ServiceStatus;
  replicas_ready: number;
  replicas_desired: number;
}

export interface PublicCapacity {
  sku: string;
  gpu_model: string;
  availability: Availability;
}

export interface PublicPoolStatus {
  pool: string;
  status: ServiceStatus;
  /** Why the pool is not up, in words that name nothing internal. */
  notes: string[];
  models: PublicModelStatus[];
  capacity: PublicCapacity[];
}

export interface PublicStatus {
  status: ServiceStatus;
  generated_at: string;
  pools: PublicPoolStatus[];
}

/** Enough free GPUs for one whole node: a customer asking for 8 is likely served. */
export const AVAILABLE_FROM_GPUS = 8;

export function availability(freeGpus: number): Availability {
  if (freeGpus <= 0) return 'none';
  return freeGpus < AVAILABLE_FROM_GPUS ? 'limited' : 'available';
}

const RANK: Record<ServiceStatus, number> = { up: 0, degraded: 1, down: 2 };
export const worst = (statuses: readonly ServiceStatus[]): ServiceStatus =>
  statuses.reduce<ServiceStatus>((w, s) => (RANK[s] > RANK[w] ? s : w), 'up');

/** The API as a whole: down only when no pool serves; one pool in trouble is a degraded service. */
export function overallStatus(pools: readonly ServiceStatus[]): ServiceStatus {
  if (pools.length > 0 && pools.every((s) => s === 'down')) return 'down';
  return pools.every((s) => s === 'up') ? 'up' : 'degraded';
}

export function modelStatus(ready: number, desired: number): ServiceStatus {
  if (desired === 0) return ready > 0 ? 'up' : 'down';
  if (ready === 0) return 'down';
  return ready < desired ? 'degraded' : 'up';
}

export function publicStatus(snapshot: FleetSnapshot, skus: ReadonlyArray<{ id: string; gpu_model: string }>): PublicStatus {
  const pools = new Set<string>([...snapshot.nodes.map((n) => n.pool), ...snapshot.desired.filter((d) => d.count > 0).map((d) => d.pool)]);
  const nodesById = new Map(snapshot.nodes.map((n) => [n.id, n]));
  const held = new Set([...snapshot.instances.flatMap((i) => i.gpuUuids), ...snapshot.replicas.flatMap((r) => r.gpuUuids)]);

  const out: PublicPoolStatus[] = [...pools].sort().map((pool) => {
    const nodes = snapshot.nodes.filter((n) => n.pool === pool);
    const gpus = snapshot.gpus.filter((g) => nodesById.get(g.nodeId)?.pool === pool);
    const notes: string[] = [];
    let status: ServiceStatus = 'up';
    const unreachable = nodes.filter((n) => n.status !== 'ready').length;
    const unhealthy = gpus.filter((g) => gpuState(nodesById.get(g.nodeId)!, g) === 'unhealthy').length;
    if (nodes.length > 0 && unreachable === nodes.length) {
      status = 'down';
      notes.push('no GPU capacity is reachable');
    } else if (unreachable > 0 || unhealthy > 0) {
      status = 'degraded';
      notes.push('part of the GPU capacity is out of service');
    }

    const byModel = new Map<string, { ready: number; desired: number }>();
    for (const d of snapshot.desired) {
      if (d.pool !== pool || d.count === 0) continue;
      const m = byModel.get(d.model) ?? { ready: 0, desired: 0 };
      m.desired += d.count;
      byModel.set(d.model, m);
    }
    for (const r of snapshot.replicas) {
      if (r.pool !== pool || r.status !== 'running') continue;
      const m = byModel.get(r.model) ?? { ready: 0, desired: 0 };
      m.ready++;
      byModel.set(r.model, m);
    }
    const models = [...byModel.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([model, m]) => ({ model, status: modelStatus(m.ready, m.desired), replicas_ready: m.ready, replicas_desired: m.desired }));
    const modelsWorst = worst(models.map((m) => m.status));
    if (modelsWorst !== 'up') {
      notes.push(modelsWorst === 'down' ? 'some models are not being served' : 'some models run on fewer replicas than planned');
      // A pool is down only when it serves nothing: no model and no reachable GPUs. A model
      // down in a pool that still serves others, or still rents GPUs, is a degraded pool.
      const servesNothing = models.every((m) => m.status === 'down') && unreachable === nodes.length;
      const poolModels = servesNothing ? 'down' : 'degraded';
      status = worst([status, poolModels]);
    }

    const capacity = skus.map((sku) => {
      const free = gpus.filter((g) => {
        const node = nodesById.get(g.nodeId)!;
        return g.name === sku.gpu_model && node.status === 'ready' && !node.cordoned && !node.draining && gpuState(node, g) === 'healthy' && !held.has(g.uuid);
      }).length;
      return { sku: sku.id, gpu_model: sku.gpu_model, availability: availability(free) };
    }).filter((c) => gpus.some((g) => g.name === c.gpu_model));
    return { pool, status, notes, models, capacity };
  });
  return { status: overallStatus(out.map((p) => p.status)), generated_at: toRfc3339(snapshot.at), pools: out };
}
