import { describe, expect, it } from 'vitest';
import type { GpuRecord } from '../store/node-store.js';
import { DCGM_SERIES, dcgmLabels, renderDcgmMetrics } from './dcgm-metrics.js';

const node = { id: 'node_1', hostname: 'gpu-1', pool: 'na' as const };
const gpu = (index: number, sample: Record<string, unknown> | null): GpuRecord => ({
  uuid: `GPU-${index}`,
  nodeId: 'node_1',
  index,
  name: 'NVIDIA A100-SXM4-80GB',
  memoryTotalBytes: null,
  healthy: true,
  healthReason: '',
  sample,
  sampledAt: 0,
});
const FULL = {
  memory_total_bytes: String(80 * 2 ** 30),
  memory_used_bytes: String(2 * 2 ** 30 + 5),
  utilization_gpu_percent: 42,
  utilization_memory_percent: 7,
  temperature_c: 55,
  power_usage_w: 312.5,
  sm_clock_mhz: 1410,
  memory_clock_mhz: 1593,
  ecc_corrected: '12',
  ecc_uncorrected: '1',
};

/** name -> value of GPU 0's series. */
async function values(sample: Record<string, unknown> | null, lastXid = new Map<string, number>()): Promise<Record<string, number>> {
  const text = await renderDcgmMetrics([{ node, gpus: [gpu(0, sample)], lastXid }]);
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^(\w+)\{.*\} (\S+)$/.exec(line);
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}

describe('dcgm-exporter metrics', () => {
  it('converts a sample to dcgm-exporter units: MiB, W, MHz, %, counts', async () => {
    expect(await values(FULL, new Map([['GPU-0', 79]]))).toEqual({
      DCGM_FI_DEV_SM_CLOCK: 1410,
      DCGM_FI_DEV_MEM_CLOCK: 1593,
      DCGM_FI_DEV_GPU_TEMP: 55,
      DCGM_FI_DEV_POWER_USAGE: 312.5,
      DCGM_FI_DEV_GPU_UTIL: 42,
      DCGM_FI_DEV_MEM_COPY_UTIL: 7,
      DCGM_FI_DEV_XID_ERRORS: 79,
      DCGM_FI_DEV_FB_FREE: 80 * 1024 - 2048 - 1, // 5 bytes over 2 GiB used: free rounds down
      DCGM_FI_DEV_FB_USED: 2048,
      DCGM_FI_DEV_ECC_SBE_VOL_TOTAL: 12,
      DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: 1,
      svc_gpu_healthy: 1,
    });
  });

  it.each<[string, Record<string, unknown> | null, string[]]>([
    ['no sample yet: only the last XID (0) and the health verdict', null, ['DCGM_FI_DEV_XID_ERRORS', 'svc_gpu_healthy']],
    ['unsupported ECC and power are left out, not 0', { ...FULL, ecc_corrected: undefined, ecc_uncorrected: undefined, power_usage_w: undefined }, DCGM_SERIES.map((s) => s.name).filter((n) => !/ECC|POWER/.test(n))],
    ['no memory total: no FB_FREE, FB_USED stays', { ...FULL, memory_total_bytes: undefined }, DCGM_SERIES.map((s) => s.name).filter((n) => n !== 'DCGM_FI_DEV_FB_FREE')],
    ['a value that is not a number is left out', { ...FULL, temperature_c: 'hot' }, DCGM_SERIES.map((s) => s.name).filter((n) => n !== 'DCGM_FI_DEV_GPU_TEMP')],
  ])('%s', async (_name, sample, names) => {
    expect(Object.keys(await values(sample)).sort()).toEqual([...names].sort());
  });

  it("labels as dcgm-exporter does, plus our node and pool; an idle GPU's instance and org are empty", () => {
    expect(dcgmLabels(node, gpu(3, null))).toEqual({
      gpu: '3',
      UUID: 'GPU-3',
      device: 'nvidia3',
      modelName: 'NVIDIA A100-SXM4-80GB',
      Hostname: 'gpu-1',
      node: 'node_1',
      pool: 'na',
      instance: '',
      org: '',
    });
  });

  it('names the instance holding a GPU and its org; the idle GPU beside it keeps the same label set', async () => {
    const holders = new Map([['GPU-1', { instanceId: 'inst_a', orgId: 'org_a' }]]);
    const text = await renderDcgmMetrics([{ node, gpus: [gpu(0, FULL), gpu(1, FULL)], lastXid: new Map(), holders }]);
    const util = text.split('\n').filter((l) => l.startsWith('DCGM_FI_DEV_GPU_UTIL{'));
    expect(util).toEqual([
      'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="gpu-1",node="node_1",pool="na",instance="",org=""} 42',
      'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-1",device="nvidia1",modelName="NVIDIA A100-SXM4-80GB",Hostname="gpu-1",node="node_1",pool="na",instance="inst_a",org="org_a"} 42',
    ]);
  });

  it('escapes label values, so a hostile hostname cannot forge a series', async () => {
    const text = await renderDcgmMetrics([
      { node: { ...node, hostname: 'x"} 1\nDCGM_FI_DEV_GPU_TEMP{gpu="9"' }, gpus: [gpu(0, FULL)], lastXid: new Map() },
    ]);
    expect(text).not.toMatch(/^DCGM_FI_DEV_GPU_TEMP\{gpu="9"/m);
    expect(text).toContain('Hostname="x\\"} 1\\nDCGM_FI_DEV_GPU_TEMP{gpu=\\"9\\""');
  });

  it('orders series by node and GPU index, whatever order they come in', async () => {
    const text = await renderDcgmMetrics([
      { node: { ...node, id: 'node_2' }, gpus: [gpu(1, FULL), gpu(0, FULL)], lastXid: new Map() },
      { node, gpus: [gpu(0, FULL)], lastXid: new Map() },
    ]);
    const util = text.split('\n').filter((l) => l.startsWith('DCGM_FI_DEV_GPU_UTIL{'));
    expect(util.map((l) => /node="(\w+)"/.exec(l)![1] + ':' + /gpu="(\d)"/.exec(l)![1])).toEqual(['node_1:0', 'node_2:0', 'node_2:1']);
  });
});

describe('svc_node_isolation_warning', () => {
  it("is 1 for each warning a node's agent reports, a newer agent's code too; nothing for a node without any", async () => {
    const text = await renderDcgmMetrics([
      { node: { ...node, hostFacts: { isolation_warnings: ['pulls_bypass_proxy', 'cgroup_v1', 'pulls_bypass_proxy', 'from_a_newer_agent', 'Not "a" label', 7] } }, gpus: [], lastXid: new Map() },
      { node: { id: 'node_2', hostname: 'gpu-2', pool: 'eu', hostFacts: { isolation_warnings: [] } }, gpus: [], lastXid: new Map() },
      { node: { id: 'node_3', hostname: 'gpu-3', pool: 'eu', hostFacts: null }, gpus: [], lastXid: new Map() },
    ]);
    const series = text.split('\n').filter((l) => l.startsWith('svc_node_isolation_warning{'));
    expect(series).toEqual([
      'svc_node_isolation_warning{Hostname="gpu-1",node="node_1",pool="na",warning="pulls_bypass_proxy"} 1',
      'svc_node_isolation_warning{Hostname="gpu-1",node="node_1",pool="na",warning="cgroup_v1"} 1',
      'svc_node_isolation_warning{Hostname="gpu-1",node="node_1",pool="na",warning="from_a_newer_agent"} 1',
    ]);
  });
});

describe('svc_node_clock_offset_seconds', () => {
  it("is the node's clock less the control plane's, in seconds, for each node it was measured for", async () => {
    const text = await renderDcgmMetrics([
      { node: { ...node, hostFacts: { clock_offset_ms: -3_600_250 } }, gpus: [], lastXid: new Map() },
      { node: { id: 'node_2', hostname: 'gpu-2', pool: 'eu', hostFacts: { clock_offset_ms: 0 } }, gpus: [], lastXid: new Map() },
      { node: { id: 'node_3', hostname: 'gpu-3', pool: 'eu', hostFacts: { hostname: 'gpu-3' } }, gpus: [], lastXid: new Map() },
    ]);
    expect(text.split('\n').filter((l) => l.startsWith('svc_node_clock_offset_seconds{'))).toEqual([
      'svc_node_clock_offset_seconds{Hostname="gpu-1",node="node_1",pool="na"} -3600.25',
      'svc_node_clock_offset_seconds{Hostname="gpu-2",node="node_2",pool="eu"} 0',
    ]);
  });
});
