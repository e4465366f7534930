// "Healthy free GPUs of model X in pool Y", as a pure function of registry records. The
// instances issue places work with it (and with instances/placement.ts, which takes the
// same facts as CandidateNode). Free means unclaimed: a GPU claim (store.nodes.claimGpus)
// is the hook an instance or replica takes when it is placed and drops when it ends.
import type { Pool } from '../models/catalog.js';
import type { GpuRecord, NodeRecord } from '../store/node-store.js';
import { isSchedulable } from './node-status.js';

export interface GpuQuery {
  /** The GPU model as NVML names it (the SKU catalog's gpu_model), matched exactly. */
  gpuModel: string;
  /** Only this pool; every pool when absent. */
  pool?: Pool;
}

export interface SchedulableNode {
  nodeId: string;
  pool: Pool;
  /** Healthy, unclaimed GPUs of the model, by GPU index. */
  freeGpuUuids: string[];
}

/** What instances/placement.ts consumes: every GPU of every node, with its facts. */
export interface CandidateNodeFacts {
  id: string;
  pool: Pool;
  schedulable: boolean;
  gpus: Array<{ uuid: string; model: string; healthy: boolean; claimed: boolean }>;
}

export function candidateNodes(
  nodes: readonly NodeRecord[],
  gpus: readonly GpuRecord[],
  claimedUuids: ReadonlySet<string>,
): CandidateNodeFacts[] {
  const byNode = new Map<string, GpuRecord[]>();
  for (const gpu of gpus) {
    const list = byNode.get(gpu.nodeId) ?? [];
    list.push(gpu);
    byNode.set(gpu.nodeId, list);
  }
  return nodes.map((node) => ({
    id: node.id,
    pool: node.pool,
    schedulable: isSchedulable(node),
    gpus: (byNode.get(node.id) ?? [])
      .sort((a, b) => a.index - b.index)
      .map((g) => ({ uuid: g.uuid, model: g.name, healthy: g.healthy, claimed: claimedUuids.has(g.uuid) })),
  }));
}

/** Nodes with at least one free healthy GPU of the model, most free GPUs first. */
export function schedulableGpus(candidates: readonly CandidateNodeFacts[], query: GpuQuery): SchedulableNode[] {
  return candidates
    .filter((node) => node.schedulable && (query.pool === undefined || node.pool === query.pool))
    .map((node) => ({
      nodeId: node.id,
      pool: node.pool,
      freeGpuUuids: node.gpus.filter((g) => g.model === query.gpuModel && g.healthy && !g.claimed).map((g) => g.uuid),
    }))
    .filter((node) => node.freeGpuUuids.length > 0)
    .sort((a, b) => b.freeGpuUuids.length - a.freeGpuUuids.length || (a.nodeId < b.nodeId ? -1 : 1));
}
