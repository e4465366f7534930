// How nodes look to operators: JSON views (snake_case, RFC 3339 times) for `--json`, and
// the small formatters the tables use. Pure functions of records and a time.
import { toRfc3339 } from '@svc/shared/clock';
import { recommendedActionOf } from '@svc/shared/xid-catalog';
import type { GpuRecord, NodeCommandRecord, NodeRecord, StoredHealthEvent } from '../store/node-store.js';
import { isSchedulable, statusLabel } from './node-status.js';

const iso = (ms: number | null): string | null => (ms === null ? null : toRfc3339(ms));
const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);

/** `5s ago`, `3m ago`, `2h ago`, `4d ago`, or `never`. */
export function formatAgo(then: number | null, now: number): string {
  if (then === null) return 'never';
  const s = Math.max(0, Math.round((now - then) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172_800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}

/** Bytes as GiB with one decimal, or `-` when unknown. */
export function formatGiB(bytes: number | null): string {
  return bytes === null ? '-' : `${(bytes / 2 ** 30).toFixed(1)}`;
}

/** `GPU-1a2b3c4d…`: enough of a UUID to tell GPUs apart in a table. */
export const shortUuid = (uuid: string): string => (uuid.length > 12 ? `${uuid.slice(0, 12)}…` : uuid);

/** Mean GPU utilization over GPUs that report it; null when none does. */
export function averageUtilization(gpus: readonly GpuRecord[]): number | null {
  const values = gpus.map((g) => num(g.sample?.utilization_gpu_percent)).filter((v): v is number => v !== null);
  return values.length === 0 ? null : Math.round(values.reduce((a, b) => a + b, 0) / values.length);
}

export function gpuView(gpu: GpuRecord) {
  const s = gpu.sample ?? {};
  return {
    index: gpu.index,
    uuid: gpu.uuid,
    name: gpu.name,
    pci_bus_id: typeof s.pci_bus_id === 'string' ? s.pci_bus_id : null,
    healthy: gpu.healthy,
    health_reason: gpu.healthReason,
    memory_total_bytes: gpu.memoryTotalBytes,
    memory_used_bytes: num(s.memory_used_bytes),
    utilization_gpu_percent: num(s.utilization_gpu_percent),
    utilization_memory_percent: num(s.utilization_memory_percent),
    temperature_c: num(s.temperature_c),
    power_usage_w: num(s.power_usage_w),
    power_limit_w: num(s.power_limit_w),
    sm_clock_mhz: num(s.sm_clock_mhz),
    memory_clock_mhz: num(s.memory_clock_mhz),
    ecc_corrected: num(s.ecc_corrected),
    ecc_uncorrected: num(s.ecc_uncorrected),
    retired_pages: num(s.retired_pages),
    remapped_rows: num(s.remapped_rows),
    throttle_reasons: Array.isArray(s.throttle_reasons) ? (s.throttle_reasons as string[]) : [],
    sampled_at: iso(gpu.sampledAt),
  };
}

export function nodeView(node: NodeRecord, gpus: readonly GpuRecord[], now: number) {
  return {
    id: node.id,
    object: 'node' as const,
    hostname: node.hostname,
    pool: node.pool,
    status: node.status,
    cordoned: node.cordoned,
    draining: node.draining,
    schedulable: isSchedulable(node),
    status_label: statusLabel(node),
    gpus_total: gpus.length,
    gpus_healthy: gpus.filter((g) => g.healthy).length,
    avg_utilization_percent: averageUtilization(gpus),
    agent_version: node.agentVersion,
    protocol_version: node.protocolVersion,
    enrolled_at: iso(node.enrolledAt),
    connected_at: iso(node.connectedAt),
    last_seen_at: iso(node.lastSeenAt),
    last_seen_seconds_ago: node.lastSeenAt === null ? null : Math.max(0, Math.round((now - node.lastSeenAt) / 1000)),
  };
}

export function timelineView(event: StoredHealthEvent) {
  return {
    seq: event.seq,
    at: toRfc3339(event.at),
    kind: event.kind,
    gpu_uuid: event.gpuUuid,
    gpu_index: event.gpuIndex,
    xid: event.xid,
    /** NVIDIA's resolution bucket for XID events (RESET_GPU, RESTART_BM, ...); null otherwise. */
    recommended_action: event.kind === 'xid' && event.xid !== null ? recommendedActionOf(event.xid, event.message) : null,
    healthy: event.healthy,
    message: event.message,
  };
}

export function commandView(command: NodeCommandRecord) {
  return {
    id: command.id,
    node_id: command.nodeId,
    kind: command.kind,
    gpu_uuid: command.args.gpuUuid || null,
    state: command.state,
    created_at: toRfc3339(command.createdAt),
    sent_at: iso(command.sentAt),
    finished_at: iso(command.finishedAt),
    error_code: command.errorCode,
    error_message: command.errorMessage,
  };
}
