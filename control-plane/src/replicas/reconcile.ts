// The replica reconciler's decisions, as a pure function: desired replicas per (model,
// quantization, pool) + the replicas that exist + the nodes -> start, stop and lose
// actions. The replica service applies them; this file only decides.
//
// Rules: replicas on unreachable (or vanished) nodes are lost and replaced. Replicas of a
// target nobody wants any more stop; surplus ones stop, those not serving first. Missing
// ones are placed on reachable, non-cordoned, non-draining nodes of the pool, spread
// across nodes; vLLM replicas also need free healthy GPUs (claimed in gpu_claims). A
// replica on a draining node, or on a GPU that turned unhealthy, is moved: a replacement
// starts elsewhere and the old one stops once enough replicas serve (at once when no
// replacement can be placed). A replica started without an API key (by a control plane
// from before replica keys) is replaced the same way: its port would serve anyone.
import type { Pool, Quantization } from '../models/catalog.js';
import type { DesiredReplica } from './desired.js';
import { targetKey } from './desired.js';
import type { ReplicaStatus } from './replica-status.js';

export interface ReplicaTarget extends DesiredReplica {
  /** GPUs per replica (the catalog's serving.gpus); 0 for the CPU engine. */
  gpus: number;
}

export interface ActualReplica {
  id: string;
  model: string;
  quantization: Quantization;
  pool: Pool;
  nodeId: string;
  gpuUuids: string[];
  /** Never a final status: the caller passes active replicas only. */
  status: ReplicaStatus;
  createdAt: number;
  /** Started without an API key (an upgrade leftover): replaced by one with a key. */
  keyless?: boolean;
}

export interface ReplicaNode {
  id: string;
  pool: Pool;
  /** The node is in session (or within its deadline). */
  reachable: boolean;
  cordoned: boolean;
  draining: boolean;
  gpus: Array<{ uuid: string; healthy: boolean; claimed: boolean }>;
}

export type ReconcileAction =
  | { kind: 'start'; model: string; quantization: Quantization; pool: Pool; nodeId: string; gpuUuids: string[] }
  | { kind: 'stop'; replicaId: string; reason: string }
  | { kind: 'lose'; replicaId: string; reason: string };

export interface Shortfall {
  model: string;
  quantization: Quantization;
  pool: Pool;
  missing: number;
  reason: string;
}

export interface ReconcilePlan {
  actions: ReconcileAction[];
  /** Targets that could not be fully placed, and why. */
  shortfalls: Shortfall[];
}

/** Surplus replicas stop in this order: those that do not serve first. */
const STOP_FIRST: Record<ReplicaStatus, number> = {
  scheduled: 0,
  restarting: 1,
  unhealthy: 2,
  starting: 3,
  running: 4,
  stopping: 5,
  stopped: 6,
  lost: 6,
};

export function reconcileReplicas(targets: readonly ReplicaTarget[], actual: readonly ActualReplica[], nodes: readonly ReplicaNode[]): ReconcilePlan {
  const actions: ReconcileAction[] = [];
  const shortfalls: Shortfall[] = [];
  const nodesById = new Map(nodes.map((n) => [n.id, n]));
  const claimed = new Set(nodes.flatMap((n) => n.gpus.filter((g) => g.claimed).map((g) => g.uuid)));

  // Replicas that count: on a reachable node and not already being stopped.
  const groups = new Map<string, ActualReplica[]>();
  const perNode = new Map<string, { total: number; byKey: Map<string, number> }>();
  const countOn = (nodeId: string) => perNode.get(nodeId) ?? perNode.set(nodeId, { total: 0, byKey: new Map() }).get(nodeId)!;
  const add = (nodeId: string, key: string, delta: number) => {
    const c = countOn(nodeId);
    c.total += delta;
    c.byKey.set(key, (c.byKey.get(key) ?? 0) + delta);
  };
  for (const r of actual) {
    const node = nodesById.get(r.nodeId);
    if (!node || !node.reachable) {
      actions.push({ kind: 'lose', replicaId: r.id, reason: node ? `node ${r.nodeId} is unreachable` : `node ${r.nodeId} is no longer registered` });
      continue;
    }
    const key = targetKey(r.model, r.quantization, r.pool);
    add(r.nodeId, key, 1);
    if (r.status === 'stopping') continue;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }

  const wanted = new Map(targets.filter((t) => t.count > 0).map((t) => [targetKey(t.model, t.quantization, t.pool), t]));
  for (const [key, replicas] of groups) {
    if (wanted.has(key)) continue;
    for (const r of replicas) {
      actions.push({ kind: 'stop', replicaId: r.id, reason: `${key} is no longer desired` });
      add(r.nodeId, key, -1);
    }
  }

  for (const [key, target] of wanted) {
    const replicas = groups.get(key) ?? [];
    const leaving = replicas.filter((r) => moveReason(r, nodesById.get(r.nodeId)!) !== null);
    const staying = replicas.filter((r) => !leaving.includes(r));

    // Surplus: keep the ones that serve, and the spread.
    const kept = [...staying].sort(
      (a, b) =>
        STOP_FIRST[b.status] - STOP_FIRST[a.status] ||
        countOn(a.nodeId).byKey.get(key)! - countOn(b.nodeId).byKey.get(key)! ||
        a.createdAt - b.createdAt ||
        (a.id < b.id ? -1 : 1),
    );
    for (const r of kept.splice(target.count)) {
      actions.push({ kind: 'stop', replicaId: r.id, reason: `surplus: ${target.count} desired for ${key}` });
      add(r.nodeId, key, -1);
    }

    let missing = target.count - kept.length;
    let unplaced = 0;
    while (missing > 0) {
      const placement = placeOne(target, key, nodes, claimed, countOn);
      if (!placement.ok) {
        unplaced = missing;
        shortfalls.push({ model: target.model, quantization: target.quantization, pool: target.pool, missing, reason: placement.reason });
        break;
      }
      actions.push({ kind: 'start', model: target.model, quantization: target.quantization, pool: target.pool, nodeId: placement.nodeId, gpuUuids: placement.gpuUuids });
      for (const uuid of placement.gpuUuids) claimed.add(uuid);
      add(placement.nodeId, key, 1);
      missing--;
    }

    // Moving off a draining node or a failed GPU, or replacing a keyless replica: once the
    // rest serve, or nowhere else to go.
    const serving = kept.filter((r) => r.status === 'running').length;
    if (serving >= target.count || unplaced > 0) {
      for (const r of leaving) actions.push({ kind: 'stop', replicaId: r.id, reason: moveReason(r, nodesById.get(r.nodeId)!)! });
    }
  }
  return { actions, shortfalls };
}

/** Why a replica must be replaced (a draining node, a GPU that turned unhealthy, no API key), or null. */
function moveReason(r: ActualReplica, node: ReplicaNode): string | null {
  if (node.draining) return `node ${node.id} is draining`;
  if (r.gpuUuids.some((uuid) => node.gpus.find((g) => g.uuid === uuid)?.healthy === false)) return `a GPU of replica ${r.id} is unhealthy`;
  if (r.keyless) return `replica ${r.id} was started without an API key`;
  return null;
}

type PlaceResult = { ok: true; nodeId: string; gpuUuids: string[] } | { ok: false; reason: string };

function placeOne(
  target: ReplicaTarget,
  key: string,
  nodes: readonly ReplicaNode[],
  claimed: ReadonlySet<string>,
  countOn: (nodeId: string) => { total: number; byKey: Map<string, number> },
): PlaceResult {
  const inPool = nodes.filter((n) => n.pool === target.pool && n.reachable && !n.cordoned && !n.draining);
  if (inPool.length === 0) return { ok: false, reason: `no reachable, schedulable node in pool ${target.pool}` };
  const fits = inPool
    .map((node) => ({ node, free: node.gpus.filter((g) => g.healthy && !claimed.has(g.uuid)).map((g) => g.uuid).sort() }))
    .filter((c) => c.free.length >= target.gpus)
    // Spread: fewest replicas of this target, then fewest replicas at all; best fit on GPUs.
    .sort(
      (a, b) =>
        (countOn(a.node.id).byKey.get(key) ?? 0) - (countOn(b.node.id).byKey.get(key) ?? 0) ||
        countOn(a.node.id).total - countOn(b.node.id).total ||
        (target.gpus > 0 ? a.free.length - b.free.length : 0) ||
        (a.node.id < b.node.id ? -1 : 1),
    );
  const best = fits[0];
  if (!best) return { ok: false, reason: `no node in pool ${target.pool} has ${target.gpus} free healthy GPU(s)` };
  return { ok: true, nodeId: best.node.id, gpuUuids: best.free.slice(0, target.gpus) };
}
