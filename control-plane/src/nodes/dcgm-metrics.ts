// Per-GPU Prometheus series named and labelled as NVIDIA's dcgm-exporter names them
// (its etc/default-counters.csv), so dashboards built for dcgm-exporter (NVIDIA's Grafana
// dashboard among them) read our fleet unchanged. Built from the latest telemetry the
// control plane holds; a value the GPU does not report (NVML "not supported") is left out,
// never exported as 0. Pure apart from prom-client's formatting. Beside them, one series
// per node: the isolation warnings its agent reports.
import { Counter, Gauge, Registry } from 'prom-client';
import type { GpuRecord, NodeRecord } from '../store/node-store.js';
import { isolationWarnings } from './node-status.js';

export interface DcgmNodeInput {
  node: Pick<NodeRecord, 'id' | 'hostname' | 'pool'> & Partial<Pick<NodeRecord, 'hostFacts'>>;
  gpus: GpuRecord[];
  /** The last XID each GPU reported (by UUID); a GPU without one exports 0, as dcgm-exporter does. */
  lastXid: ReadonlyMap<string, number>;
  /** The instance holding each GPU (by UUID); a GPU absent here is idle (or a model replica's). */
  holders?: ReadonlyMap<string, GpuHolder>;
}

/** What runs on a GPU, as the `instance` and `org` labels name it. */
export interface GpuHolder {
  instanceId: string;
  orgId: string;
}

const LABELS = ['gpu', 'UUID', 'device', 'modelName', 'Hostname', 'node', 'pool', 'instance', 'org'] as const;
type Labels = Record<(typeof LABELS)[number], string>;

const MIB = 2 ** 20;

interface Series {
  name: string;
  type: 'gauge' | 'counter';
  help: string;
  /** The value for one GPU; undefined when its GPU does not report it. */
  value: (sample: Record<string, unknown>, gpu: GpuRecord, lastXid: number) => number | undefined;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && v !== '' && Number.isFinite(Number(v)) ? Number(v) : undefined);

/** The series, with dcgm-exporter's names, types and HELP texts. */
export const DCGM_SERIES: readonly Series[] = [
  { name: 'DCGM_FI_DEV_SM_CLOCK', type: 'gauge', help: 'SM clock frequency (in MHz).', value: (s) => num(s.sm_clock_mhz) },
  { name: 'DCGM_FI_DEV_MEM_CLOCK', type: 'gauge', help: 'Memory clock frequency (in MHz).', value: (s) => num(s.memory_clock_mhz) },
  { name: 'DCGM_FI_DEV_GPU_TEMP', type: 'gauge', help: 'GPU temperature (in C).', value: (s) => num(s.temperature_c) },
  { name: 'DCGM_FI_DEV_POWER_USAGE', type: 'gauge', help: 'Power draw (in W).', value: (s) => num(s.power_usage_w) },
  { name: 'DCGM_FI_DEV_GPU_UTIL', type: 'gauge', help: 'GPU utilization (in %).', value: (s) => num(s.utilization_gpu_percent) },
  { name: 'DCGM_FI_DEV_MEM_COPY_UTIL', type: 'gauge', help: 'Memory utilization (in %).', value: (s) => num(s.utilization_memory_percent) },
  { name: 'DCGM_FI_DEV_XID_ERRORS', type: 'gauge', help: 'Value of the last XID error encountered.', value: (_s, _g, xid) => xid },
  {
    name: 'DCGM_FI_DEV_FB_FREE',
    type: 'gauge',
    help: 'Framebuffer memory free (in MiB).',
    value: (s) => {
      const total = num(s.memory_total_bytes);
      const used = num(s.memory_used_bytes);
      return total === undefined || used === undefined ? undefined : Math.floor(Math.max(0, total - used) / MIB);
    },
  },
  {
    name: 'DCGM_FI_DEV_FB_USED',
    type: 'gauge',
    help: 'Framebuffer memory used (in MiB).',
    value: (s) => {
      const used = num(s.memory_used_bytes);
      return used === undefined ? undefined : Math.floor(used / MIB);
    },
  },
  // The agent reports NVML's volatile ECC counts (since the last driver load or GPU reset).
  { name: 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL', type: 'counter', help: 'Total number of single-bit volatile ECC errors.', value: (s) => num(s.ecc_corrected) },
  { name: 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', type: 'counter', help: 'Total number of double-bit volatile ECC errors.', value: (s) => num(s.ecc_uncorrected) },
  // Ours, not dcgm-exporter's: the agent's health verdict (XID class, ECC, thermal), which
  // the "GPU unhealthy" alert reads; dcgm-exporter has no such field.
  { name: 'svc_gpu_healthy', type: 'gauge', help: "1 when the node agent's health policy holds the GPU healthy, 0 when not.", value: (_s, gpu) => (gpu.healthy ? 1 : 0) },
];

/**
 * dcgm-exporter's labels for one GPU, plus our node id, pool, and the instance holding the
 * GPU with its org. An idle GPU has empty `instance` and `org`, as dcgm-exporter leaves
 * `pod` and `namespace` empty for a GPU no pod holds, so the label set never changes.
 */
export function dcgmLabels(node: DcgmNodeInput['node'], gpu: GpuRecord, holder?: GpuHolder): Labels {
  return {
    gpu: String(gpu.index),
    UUID: gpu.uuid,
    device: `nvidia${gpu.index}`,
    modelName: gpu.name,
    Hostname: node.hostname,
    node: node.id,
    pool: node.pool,
    instance: holder?.instanceId ?? '',
    org: holder?.orgId ?? '',
  };
}

/** The exposition text (Prometheus text format 0.0.4) for every GPU of every node given. */
export async function renderDcgmMetrics(nodes: readonly DcgmNodeInput[]): Promise<string> {
  const registry = new Registry();
  const sorted = [...nodes].sort((a, b) => a.node.id.localeCompare(b.node.id));
  for (const series of DCGM_SERIES) {
    const options = { name: series.name, help: series.help, labelNames: LABELS, registers: [registry] };
    const metric = series.type === 'gauge' ? new Gauge(options) : new Counter(options);
    for (const { node, gpus, lastXid, holders } of sorted) {
      for (const gpu of [...gpus].sort((a, b) => a.index - b.index)) {
        const value = series.value(gpu.sample ?? {}, gpu, lastXid.get(gpu.uuid) ?? 0);
        if (value === undefined) continue;
        const labels = dcgmLabels(node, gpu, holders?.get(gpu.uuid));
        if (metric instanceof Gauge) metric.set(labels, value);
        else metric.inc(labels, value);
      }
    }
  }
  // Per node, not per GPU: on this listener only, since where isolation is weaker is no
  // one's business but the operator's (the public /metrics would point an attacker at it).
  const warnings = new Gauge({ name: 'svc_node_isolation_warning', help: NODE_ISOLATION_HELP, labelNames: ['Hostname', 'node', 'pool', 'warning'], registers: [registry] });
  for (const { node } of sorted) for (const warning of isolationWarnings(node)) warnings.set({ Hostname: node.hostname, node: node.id, pool: node.pool, warning }, 1);
  const clock = new Gauge({ name: 'svc_node_clock_offset_seconds', help: NODE_CLOCK_HELP, labelNames: ['Hostname', 'node', 'pool'], registers: [registry] });
  for (const { node } of sorted) {
    const offset = clockOffsetMs(node);
    if (offset !== null) clock.set({ Hostname: node.hostname, node: node.id, pool: node.pool }, offset / 1000);
  }
  return registry.metrics();
}

/** The node's clock less the control plane's as last measured (host facts' clock_offset_ms), or null when never measured. */
export function clockOffsetMs(node: { hostFacts?: Record<string, unknown> | null | undefined }): number | null {
  const offset = node.hostFacts?.['clock_offset_ms'];
  return typeof offset === 'number' && Number.isFinite(offset) ? offset : null;
}

const NODE_CLOCK_HELP =
  "The node's clock less the control plane's, as the control plane measured it from the agent's Hello and heartbeats (0 within a second). Billing reads the node's times on the control plane's clock; past a second, run NTP on the node.";

const NODE_ISOLATION_HELP =
  "1 for each part of a node's set-up its agent reports as keeping tenants apart less well (HostFacts.isolation_warnings): pulls_bypass_proxy, no_host_firewall, cgroup_v1, no_log_limit, core_dumps_to_host, shared_rlimits.";
