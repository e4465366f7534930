// Where an instance goes, as a pure function of the nodes the registry reports.
// Candidates: schedulable nodes (reachable, not cordoned, not draining) of the pool with
// enough healthy, unclaimed GPUs of the SKU's model. Best fit packs partly used nodes
// first, so whole 8-GPU nodes stay free for 8-GPU requests. GPUs held by reservations
// (or any running instance) are claimed and never offered: nothing is preempted.
import type { Pool } from '../models/catalog.js';

export interface CandidateGpu {
  uuid: string;
  model: string;
  healthy: boolean;
  claimed: boolean;
}

export interface CandidateNode {
  id: string;
  pool: Pool;
  schedulable: boolean;
  gpus: CandidateGpu[];
}

export interface PlacementRequest {
  gpuModel: string;
  gpuCount: number;
  /** A pinned pool, or the pools to try in order. */
  pools: Pool[];
}

export type Placement =
  | { ok: true; nodeId: string; pool: Pool; gpuUuids: string[] }
  | { ok: false; reason: string };

function freeGpus(node: CandidateNode, model: string): CandidateGpu[] {
  return node.gpus.filter((g) => g.model === model && g.healthy && !g.claimed);
}

/**
 * `turn` rotates which of the chosen node's free GPUs are taken (0: the lowest UUIDs).
 * Requests placed at the same moment all pick the same node and, at turn 0, the same GPUs;
 * only one claim of a GPU can win, so a retry after losing one takes another turn.
 */
export function place(nodes: readonly CandidateNode[], request: PlacementRequest, turn = 0): Placement {
  for (const pool of request.pools) {
    const fits = nodes
      .filter((n) => n.pool === pool && n.schedulable)
      .map((n) => ({ node: n, free: freeGpus(n, request.gpuModel) }))
      .filter((c) => c.free.length >= request.gpuCount)
      // Best fit: the fewest free GPUs left over; node id breaks ties so placement is stable.
      .sort((a, b) => a.free.length - b.free.length || (a.node.id < b.node.id ? -1 : 1));
    const best = fits[0];
    if (best) {
      const sorted = [...best.free].sort((a, b) => (a.uuid < b.uuid ? -1 : 1));
      const start = turn % sorted.length;
      const gpus = [...sorted.slice(start), ...sorted.slice(0, start)].slice(0, request.gpuCount);
      return { ok: true, nodeId: best.node.id, pool, gpuUuids: gpus.map((g) => g.uuid) };
    }
  }
  const where = request.pools.length === 1 ? `pool ${request.pools[0]}` : `pools ${request.pools.join(', ')}`;
  return { ok: false, reason: `no node in ${where} has ${request.gpuCount} free healthy ${request.gpuModel} GPU(s)` };
}

/** Free healthy GPUs of a model per pool, for the SKU listing. */
export function freeCapacity(nodes: readonly CandidateNode[], gpuModel: string): Partial<Record<Pool, { free_gpus: number; largest_block: number }>> {
  const out: Partial<Record<Pool, { free_gpus: number; largest_block: number }>> = {};
  for (const node of nodes) {
    if (!node.schedulable) continue;
    const free = freeGpus(node, gpuModel).length;
    const entry = (out[node.pool] ??= { free_gpus: 0, largest_block: 0 });
    entry.free_gpus += free;
    entry.largest_block = Math.max(entry.largest_block, free);
  }
  return out;
}
