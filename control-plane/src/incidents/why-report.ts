// `svcctl why <node | gpu uuid | instance id>`: the incident view on one screen. Two halves:
// buildWhyReport reads the store into a plain data object (also the --json output, and what
// an operator API can serve as is); renderWhyReport turns that object into text. Reads are
// scoped to the one node involved, so the report stays fast on a large fleet.
import { toRfc3339 } from '@svc/shared/clock';
import { ApiError } from '@svc/shared/errors';
import { classifyXid, recommendedActionOf, XID_ACTION_TEXT, type XidAction } from '@svc/shared/xid-catalog';
import type { GpuRecord, NodeRecord, NodeStore, StoredHealthEvent } from '../store/node-store.js';
import type { InstanceStore } from '../store/instance-store.js';
import type { ReplicaStore } from '../store/replica-store.js';
import type { OrgStore } from '../store/store.js';
import type { RemediationRecord, RemediationStore } from '../store/remediation-store.js';
import { statusLabel } from '../nodes/node-status.js';

export interface WhySources {
  nodes: NodeStore;
  instances: InstanceStore;
  replicas: ReplicaStore;
  orgs: OrgStore;
  remediations?: RemediationStore;
}

/** Timeline rows read per node; the report shows those of the GPUs in question. */
export const WHY_TIMELINE_WINDOW = 200;
const TIMELINE_SHOWN = 25;

const iso = (ms: number | null | undefined): string | null => (ms === null || ms === undefined ? null : toRfc3339(ms));
const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);

export interface WhyReport {
  target: { kind: 'node' | 'gpu' | 'instance'; ref: string };
  generated_at: string;
  node: {
    id: string;
    hostname: string;
    pool: string;
    status: string;
    cordoned: boolean;
    draining: boolean;
    last_seen_at: string | null;
  };
  gpus: Array<{
    index: number;
    uuid: string;
    name: string;
    healthy: boolean;
    health_reason: string;
    /** When the GPU's health last changed, as far as the timeline window shows; null if not in it. */
    since: string | null;
    temperature_c: number | null;
    ecc_uncorrected: number | null;
    in_question: boolean;
  }>;
  timeline: Array<{
    at: string;
    kind: string;
    gpu_index: number | null;
    gpu_uuid: string | null;
    xid: number | null;
    meaning: string | null;
    recommended_action: XidAction | null;
    recommended_action_text: string | null;
    healthy: boolean | null;
    message: string;
  }>;
  workloads: Array<{ kind: 'instance' | 'replica'; id: string; status: string; org_id: string | null; org_name: string | null; gpu_uuids: string[] }>;
  remediations: Array<{
    id: string;
    gpu_uuid: string | null;
    xid: number | null;
    recommended_action: XidAction;
    kind: string;
    stage: string;
    fault: string;
    detail: string;
    opened_at: string;
    updated_at: string;
    closed_at: string | null;
    outcome: string | null;
  }>;
}

interface Resolved {
  kind: WhyReport['target']['kind'];
  node: NodeRecord;
  /** The GPUs the question is about; every GPU of the node for a node. */
  gpuUuids: string[] | null;
}

async function resolve(src: WhySources, ref: string): Promise<Resolved> {
  const instance = await src.instances.get(ref);
  if (instance) {
    if (!instance.nodeId) throw new ApiError('not_found', `instance ${ref} is not placed on a node (status ${instance.status})`);
    const node = await src.nodes.getNode(instance.nodeId);
    if (!node) throw new ApiError('not_found', `instance ${ref} names node ${instance.nodeId}, which is not known`);
    return { kind: 'instance', node, gpuUuids: instance.gpuUuids };
  }
  const node = await src.nodes.getNode(ref);
  if (node) return { kind: 'node', node, gpuUuids: null };
  // A GPU UUID (or prefix) is an index range; only then the hostnames, which need every node.
  if (/^GPU-/i.test(ref)) {
    const gpus = await src.nodes.findGpus(ref, 2);
    if (gpus.length > 1) throw new ApiError('invalid_request', `more than one GPU starts with ${ref}; give more of the UUID`);
    const owner = gpus[0] && (await src.nodes.getNode(gpus[0].nodeId));
    if (owner) return { kind: 'gpu', node: owner, gpuUuids: [gpus[0]!.uuid] };
  }
  const byName = (await src.nodes.listNodes()).filter((n) => n.hostname === ref);
  if (byName.length === 1) return { kind: 'node', node: byName[0]!, gpuUuids: null };
  if (byName.length > 1) throw new ApiError('invalid_request', `${byName.length} nodes have hostname ${ref}; use the node id`);
  throw new ApiError('not_found', `no instance, node (id or hostname) or GPU UUID matches ${ref}`);
}

/** Reads the store into a report about `ref` (an instance id, node id or hostname, or GPU UUID or prefix). */
export async function buildWhyReport(src: WhySources, ref: string, now: number): Promise<WhyReport> {
  const { kind, node, gpuUuids } = await resolve(src, ref);
  const [gpus, events, instances, replicas, remediations] = await Promise.all([
    src.nodes.listGpus(node.id),
    src.nodes.listHealthEvents(node.id, WHY_TIMELINE_WINDOW),
    src.instances.listActiveOnNode(node.id),
    src.replicas.listActive(),
    src.remediations?.list({ nodeId: node.id, limit: 50 }) ?? Promise.resolve([] as RemediationRecord[]),
  ]);
  const asked = new Set(gpuUuids ?? gpus.map((g) => g.uuid));
  const concerns = (uuids: readonly string[]): boolean => gpuUuids === null || uuids.some((u) => asked.has(u));
  const relevant = (e: { gpuUuid: string | null }) => e.gpuUuid === null || asked.has(e.gpuUuid);
  const orgIds = [...new Set(instances.map((i) => i.orgId))];
  const orgNames = new Map((await Promise.all(orgIds.map((id) => src.orgs.get(id)))).filter((o) => o !== undefined).map((o) => [o.id, o.name]));

  return {
    target: { kind, ref },
    generated_at: toRfc3339(now),
    node: {
      id: node.id,
      hostname: node.hostname,
      pool: node.pool,
      status: statusLabel(node),
      cordoned: node.cordoned,
      draining: node.draining,
      last_seen_at: iso(node.lastSeenAt),
    },
    gpus: [...gpus].sort((a, b) => a.index - b.index).map((g) => gpuLine(g, events, asked.has(g.uuid))),
    timeline: events.filter(relevant).slice(0, TIMELINE_SHOWN).map(timelineLine),
    workloads: [
      ...instances
        .filter((i) => concerns(i.gpuUuids))
        .map((i) => ({ kind: 'instance' as const, id: i.id, status: i.status, org_id: i.orgId, org_name: orgNames.get(i.orgId) ?? null, gpu_uuids: i.gpuUuids })),
      ...replicas
        .filter((r) => r.nodeId === node.id && concerns(r.gpuUuids))
        .map((r) => ({ kind: 'replica' as const, id: r.id, status: r.status, org_id: null, org_name: null, gpu_uuids: r.gpuUuids })),
    ],
    remediations: remediations
      .filter((r) => r.kind === 'reboot_node' || r.gpuUuid === null || asked.has(r.gpuUuid))
      .map((r) => ({
        id: r.id,
        gpu_uuid: r.gpuUuid,
        xid: r.xid,
        recommended_action: r.action,
        kind: r.kind,
        stage: r.stage,
        fault: r.fault,
        detail: r.detail,
        opened_at: toRfc3339(r.openedAt),
        updated_at: toRfc3339(r.updatedAt),
        closed_at: iso(r.closedAt),
        outcome: r.outcome,
      })),
  };
}

function gpuLine(gpu: GpuRecord, events: readonly StoredHealthEvent[], inQuestion: boolean): WhyReport['gpus'][number] {
  // Newest first: walk back over the GPU's events while they report its current health; the
  // oldest of that run is when the current state began (later ones, e.g. XID 13 on an
  // unhealthy GPU, only repeat it).
  let change: StoredHealthEvent | undefined;
  for (const e of events) {
    if (e.gpuUuid !== gpu.uuid || e.healthy === null) continue;
    if (e.healthy !== gpu.healthy) break;
    change = e;
  }
  return {
    index: gpu.index,
    uuid: gpu.uuid,
    name: gpu.name,
    healthy: gpu.healthy,
    health_reason: gpu.healthReason,
    since: iso(change?.at),
    temperature_c: num(gpu.sample?.temperature_c),
    ecc_uncorrected: num(gpu.sample?.ecc_uncorrected),
    in_question: inQuestion,
  };
}

function timelineLine(e: StoredHealthEvent): WhyReport['timeline'][number] {
  const isXid = e.kind === 'xid' && e.xid !== null;
  const action = isXid ? recommendedActionOf(e.xid!, e.message) : null;
  return {
    at: toRfc3339(e.at),
    kind: e.kind,
    gpu_index: e.gpuIndex,
    gpu_uuid: e.gpuUuid,
    xid: e.xid,
    meaning: isXid ? classifyXid(e.xid!, e.message).meaning : null,
    recommended_action: action,
    recommended_action_text: action ? XID_ACTION_TEXT[action] : null,
    healthy: e.healthy,
    message: e.message,
  };
}

/** The report as a person reads it on a terminal. */
export function renderWhyReport(r: WhyReport): string {
  const out: string[] = [];
  const n = r.node;
  out.push(`WHY ${r.target.kind} ${r.target.ref}   (at ${r.generated_at})`);
  out.push(`NODE ${n.id}  ${n.hostname}  pool ${n.pool}  status ${n.status}  last seen ${n.last_seen_at ?? 'never'}`);
  out.push('');
  out.push('GPUS');
  for (const g of r.gpus) {
    if (r.target.kind !== 'node' && !g.in_question && g.healthy) continue;
    const health = g.healthy ? 'healthy' : `UNHEALTHY (${g.health_reason || 'no reason given'})`;
    const extras = [g.temperature_c === null ? null : `${g.temperature_c} °C`, g.ecc_uncorrected ? `${g.ecc_uncorrected} uncorrectable ECC` : null].filter(Boolean).join(', ');
    out.push(`  ${g.in_question ? '>' : ' '} [${g.index}] ${g.uuid}  ${g.name}  ${health}${g.since ? ` since ${g.since}` : ''}${extras ? `  ${extras}` : ''}`);
  }
  out.push('');
  out.push('REMEDIATION');
  if (r.remediations.length === 0) out.push('  none');
  for (const m of r.remediations) {
    const state = m.stage === 'closed' ? `done (${m.outcome}) at ${m.closed_at}` : `IN PROGRESS: ${m.stage}`;
    out.push(`  ${m.id}  ${m.kind}  ${state}  opened ${m.opened_at}`);
    out.push(`    ${m.fault} -> ${XID_ACTION_TEXT[m.recommended_action]} (${m.recommended_action})`);
    out.push(`    latest: ${m.detail}`);
  }
  out.push('');
  out.push('AFFECTED WORKLOADS');
  if (r.workloads.length === 0) out.push('  none');
  for (const w of r.workloads) {
    const who = w.kind === 'instance' ? `org ${w.org_name ?? '?'} (${w.org_id})` : 'provider (model replica)';
    out.push(`  ${w.kind} ${w.id}  ${w.status}  ${who}  GPUs ${w.gpu_uuids.join(', ') || '-'}`);
  }
  out.push('');
  out.push('TIMELINE (newest first)');
  if (r.timeline.length === 0) out.push('  no events');
  for (const e of r.timeline) {
    const gpu = e.gpu_index === null ? 'node ' : `gpu ${e.gpu_index}`;
    const meaning = e.xid !== null && e.meaning && e.kind === 'xid' ? `XID ${e.xid} ${e.meaning}; NVIDIA: ${e.recommended_action_text} (${e.recommended_action})` : e.message;
    out.push(`  ${e.at}  ${gpu}  ${e.kind.padEnd(17)} ${meaning}`);
  }
  return `${out.join('\n')}\n`;
}
