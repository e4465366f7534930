// The operators' view of the fleet, as a pure function of a snapshot: pools with their
// totals, each node with one square per GPU (its health state and what holds it), the
// instances and replicas on it with their orgs, and the health timeline with NVIDIA's
// meaning and recommended action for each XID.
import { classifyXid, recommendedActionOf, toRfc3339, XID_ACTION_TEXT } from '@svc/shared';
import type { GpuRecord, NodeRecord, StoredHealthEvent } from '../store/node-store.js';
import { isSchedulable, statusLabel } from '../nodes/node-status.js';
import type { FleetSnapshot } from './fleet-read.js';

/** healthy: green; unhealthy: red (an XID, ECC or thermal fault); unknown: grey (node offline or never sampled). */
export type GpuState = 'healthy' | 'unhealthy' | 'unknown';

export interface GpuSquare {
  index: number;
  uuid: string;
  name: string;
  state: GpuState;
  reason: string;
  /** The instance or replica holding the GPU; null when free. */
  heldBy: string | null;
}

export interface WorkloadView {
  kind: 'instance' | 'replica';
  id: string;
  /** The instance's org name (its id when the org is unknown); null for replicas, which are the provider's own. */
  org: string | null;
  status: string;
  /** Instance labels, or the replica's model and quantization. */
  detail: string;
  gpuIndexes: number[];
}

export interface TimelineEntry {
  seq: number;
  at: string;
  nodeId: string;
  hostname: string;
  gpuIndex: number | null;
  kind: string;
  xid: number | null;
  /** NVIDIA's description of the XID; null for other events. */
  meaning: string | null;
  /** What to do about it, in words; null for other events. */
  action: string | null;
  healthy: boolean | null;
  message: string;
  /** Instances and replicas on that GPU now: who is affected. */
  affected: string[];
}

export interface NodeCard {
  id: string;
  hostname: string;
  status: string;
  gpus: GpuSquare[];
  workloads: WorkloadView[];
  timeline: TimelineEntry[];
}

export interface PoolTotals {
  nodes: number;
  nodesReady: number;
  gpus: number;
  gpusFree: number;
  gpusUsed: number;
  gpusUnhealthy: number;
  gpusUnknown: number;
  replicasRunning: number;
  replicasDesired: number;
}

export interface PoolView {
  pool: string;
  totals: PoolTotals;
  nodes: NodeCard[];
}

export interface FleetView {
  generatedAt: string;
  pools: PoolView[];
  /** The latest health events across the fleet, newest first. */
  timeline: TimelineEntry[];
}

/** Entries in the fleet-wide timeline. */
export const FLEET_TIMELINE_LENGTH = 30;
/** Entries in each node's own timeline (newest first). */
export const NODE_TIMELINE_LENGTH = 5;

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    let list = out.get(k);
    if (!list) out.set(k, (list = []));
    list.push(item);
  }
  return out;
}

export function gpuState(node: Pick<NodeRecord, 'status'>, gpu: Pick<GpuRecord, 'healthy' | 'sample'>): GpuState {
  if (node.status !== 'ready' || gpu.sample === null) return 'unknown';
  return gpu.healthy ? 'healthy' : 'unhealthy';
}

function labelsText(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}

function timelineEntry(event: StoredHealthEvent, hostname: string, affected: string[]): TimelineEntry {
  const isXid = event.kind === 'xid' && event.xid !== null;
  return {
    seq: event.seq,
    at: toRfc3339(event.at),
    nodeId: event.nodeId,
    hostname,
    gpuIndex: event.gpuIndex,
    kind: event.kind,
    xid: event.xid,
    meaning: isXid ? classifyXid(event.xid!, event.message).meaning : null,
    action: isXid ? XID_ACTION_TEXT[recommendedActionOf(event.xid!, event.message)] : null,
    healthy: event.healthy,
    message: event.message,
    affected,
  };
}

export function fleetView(snapshot: FleetSnapshot): FleetView {
  // Grouped once: the page serves fleets of thousands of nodes every few seconds.
  const gpusByNode = groupBy(snapshot.gpus, (g) => g.nodeId);
  const holder = new Map<string, string>();
  const workloadsByNode = new Map<string, WorkloadView[]>();
  const indexOf = new Map(snapshot.gpus.map((g) => [g.uuid, g.index]));
  const addWorkload = (nodeId: string | null, w: WorkloadView, uuids: string[]): void => {
    if (nodeId === null) return;
    for (const uuid of uuids) holder.set(uuid, w.id);
    let list = workloadsByNode.get(nodeId);
    if (!list) workloadsByNode.set(nodeId, (list = []));
    list.push(w);
  };
  for (const inst of snapshot.instances) {
    const gpuIndexes = inst.gpuUuids.map((u) => indexOf.get(u)).filter((i): i is number => i !== undefined);
    const org = snapshot.orgNames.get(inst.orgId) ?? inst.orgId;
    addWorkload(inst.nodeId, { kind: 'instance', id: inst.id, org, status: inst.status, detail: labelsText(inst.labels), gpuIndexes }, inst.gpuUuids);
  }
  for (const rep of snapshot.replicas) {
    const gpuIndexes = rep.gpuUuids.map((u) => indexOf.get(u)).filter((i): i is number => i !== undefined);
    addWorkload(rep.nodeId, { kind: 'replica', id: rep.id, org: null, status: rep.status, detail: `${rep.model} ${rep.quantization}`, gpuIndexes }, rep.gpuUuids);
  }
  const hostnames = new Map(snapshot.nodes.map((n) => [n.id, n.hostname]));
  const affectedBy = (event: StoredHealthEvent): string[] => {
    if (event.gpuUuid !== null) {
      const h = holder.get(event.gpuUuid);
      return h ? [h] : [];
    }
    // A node going down takes everything on it; other node events (up, forgotten) harm no one.
    return event.kind === 'node_down' ? (workloadsByNode.get(event.nodeId) ?? []).map((w) => w.id) : [];
  };
  const entries = snapshot.events.map((e) => timelineEntry(e, hostnames.get(e.nodeId) ?? e.nodeId, affectedBy(e)));
  const entriesByNode = groupBy(entries, (e) => e.nodeId);

  const pools = new Map<string, PoolView>();
  const poolOf = (pool: string): PoolView => {
    let view = pools.get(pool);
    if (!view) {
      view = { pool, nodes: [], totals: { nodes: 0, nodesReady: 0, gpus: 0, gpusFree: 0, gpusUsed: 0, gpusUnhealthy: 0, gpusUnknown: 0, replicasRunning: 0, replicasDesired: 0 } };
      pools.set(pool, view);
    }
    return view;
  };
  const sortedNodes = [...snapshot.nodes].sort((a, b) => a.pool.localeCompare(b.pool) || a.hostname.localeCompare(b.hostname) || a.id.localeCompare(b.id));
  for (const node of sortedNodes) {
    const view = poolOf(node.pool);
    const gpus = (gpusByNode.get(node.id) ?? []).sort((a, b) => a.index - b.index);
    const squares = gpus.map((g) => ({ index: g.index, uuid: g.uuid, name: g.name, state: gpuState(node, g), reason: g.healthReason, heldBy: holder.get(g.uuid) ?? null }));
    const t = view.totals;
    t.nodes++;
    if (node.status === 'ready') t.nodesReady++;
    for (const s of squares) {
      t.gpus++;
      if (s.state === 'unknown') t.gpusUnknown++;
      else if (s.state === 'unhealthy') t.gpusUnhealthy++;
      else if (s.heldBy !== null) t.gpusUsed++;
      else if (isSchedulable(node)) t.gpusFree++;
    }
    view.nodes.push({
      id: node.id,
      hostname: node.hostname,
      status: statusLabel(node),
      gpus: squares,
      workloads: workloadsByNode.get(node.id) ?? [],
      timeline: (entriesByNode.get(node.id) ?? []).slice(0, NODE_TIMELINE_LENGTH),
    });
  }
  for (const rep of snapshot.replicas) if (rep.status === 'running') poolOf(rep.pool).totals.replicasRunning++;
  for (const d of snapshot.desired) if (d.count > 0) poolOf(d.pool).totals.replicasDesired += d.count;

  return {
    generatedAt: toRfc3339(snapshot.at),
    pools: [...pools.values()].sort((a, b) => a.pool.localeCompare(b.pool)),
    timeline: [...entries].sort((a, b) => b.seq - a.seq).slice(0, FLEET_TIMELINE_LENGTH),
  };
}
