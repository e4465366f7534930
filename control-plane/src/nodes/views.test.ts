import { describe, expect, it } from 'vitest';
import type { GpuRecord, StoredHealthEvent } from '../store/node-store.js';
import { averageUtilization, formatAgo, formatGiB, gpuView, shortUuid, timelineView } from './views.js';

const gpu = (sample: Record<string, unknown> | null): GpuRecord => ({
  uuid: 'GPU-12345678-aaaa-bbbb',
  nodeId: 'node_1',
  index: 0,
  name: 'NVIDIA H100 80GB HBM3',
  memoryTotalBytes: 80 * 2 ** 30,
  healthy: true,
  healthReason: '',
  sample,
  sampledAt: 0,
});

describe('node views', () => {
  it("gives XID timeline rows NVIDIA's recommended action, and other rows none", () => {
    const row = (kind: StoredHealthEvent['kind'], xid: number | null, message: string): StoredHealthEvent => ({
      seq: 1, nodeId: 'node_1', gpuUuid: 'GPU-1', gpuIndex: 0, kind, xid, healthy: false, message, at: 0,
    });
    expect(timelineView(row('xid', 48, 'XID 48: double-bit ECC error; recommended action: reset the GPU (RESET_GPU)')).recommended_action).toBe('RESET_GPU');
    expect(timelineView(row('xid', 79, 'XID 79')).recommended_action).toBe('RESTART_BM'); // an older agent's message
    expect(timelineView(row('thermal', null, '95 °C')).recommended_action).toBeNull();
  });

  it('says how long ago in the largest sensible unit', () => {
    expect(formatAgo(null, 0)).toBe('never');
    expect(formatAgo(0, 5_000)).toBe('5s ago');
    expect(formatAgo(0, 300_000)).toBe('5m ago');
    expect(formatAgo(0, 3 * 3_600_000)).toBe('3h ago');
    expect(formatAgo(0, 3 * 86_400_000)).toBe('3d ago');
    expect(formatAgo(10_000, 0)).toBe('0s ago');
  });

  it('formats memory and UUIDs for tables', () => {
    expect(formatGiB(80 * 2 ** 30)).toBe('80.0');
    expect(formatGiB(null)).toBe('-');
    expect(shortUuid('GPU-12345678-aaaa-bbbb')).toBe('GPU-12345678…');
  });

  it('averages utilization over GPUs that report it, absent values staying absent', () => {
    expect(averageUtilization([gpu({ utilization_gpu_percent: 50 }), gpu({ utilization_gpu_percent: 101 }), gpu({})])).toBe(76);
    expect(averageUtilization([gpu(null)])).toBeNull();
    const view = gpuView(gpu({ temperature_c: 40 }));
    expect(view.temperature_c).toBe(40);
    expect(view.power_usage_w).toBeNull();
  });
});
