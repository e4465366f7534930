import { describe, expect, it } from 'vitest';
import { gpuFromSample, healthEventRecord } from './node-registry.js';

describe('healthEventRecord', () => {
  const base = { gpu_uuid: 'GPU-a', gpu_index: 2, xid: 0, healthy: false, message: '', at_ms: 0 };

  it('maps protocol kinds to timeline kinds, naming an XID without a message', () => {
    expect(healthEventRecord('node_1', { ...base, kind: 'XID', xid: 79 }, 5)).toEqual({
      nodeId: 'node_1',
      gpuUuid: 'GPU-a',
      gpuIndex: 2,
      kind: 'xid',
      xid: 79,
      healthy: false,
      message: 'XID 79',
      at: 5,
    });
    expect(healthEventRecord('node_1', { ...base, kind: 'ECC_UNCORRECTABLE', message: '2 new uncorrectable' }, 5)).toMatchObject({ kind: 'ecc_uncorrectable', xid: null, message: '2 new uncorrectable' });
    expect(healthEventRecord('node_1', { ...base, kind: 'RECOVERED', healthy: true }, 5)).toMatchObject({ kind: 'recovered', healthy: true, message: 'recovered' });
    expect(healthEventRecord('node_1', { ...base, kind: 'HEALTH_EVENT_KIND_UNSPECIFIED' }, 5).kind).toBe('other');
  });
});

describe('gpuFromSample', () => {
  it('keeps reported values, leaves unsupported ones absent and drops loader-internal keys', () => {
    const sample = {
      index: 0,
      uuid: 'GPU-a',
      name: 'NVIDIA L40S',
      pci_bus_id: '0000:01:00.0',
      memory_total_bytes: 48e9,
      temperature_c: 0,
      _temperature_c: 'temperature_c',
      throttle_reasons: [],
      healthy: false,
      health_reason: 'XID 48',
    };
    const gpu = gpuFromSample(sample as never, 123);
    expect(gpu).toMatchObject({ uuid: 'GPU-a', memoryTotalBytes: 48e9, healthy: false, healthReason: 'XID 48', sampledAt: 123 });
    expect(gpu.sample).toHaveProperty('temperature_c', 0); // a real zero stays a zero
    expect(gpu.sample).not.toHaveProperty('_temperature_c');
    expect(gpu.sample).not.toHaveProperty('power_usage_w');
  });
});
