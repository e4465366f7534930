import { describe, expect, it } from 'vitest';
import type { GpuReading } from 'node-nvml-bindings';
import { INITIAL_GPU_HEALTH } from '../health/health-policy.js';
import { toGpuSample, unreadableGpuSample } from './gpu-sample.js';

const full: GpuReading = {
  index: 1,
  uuid: 'GPU-1',
  name: 'NVIDIA H100 80GB HBM3',
  pciBusId: '00000000:18:00.0',
  memoryTotalBytes: 85520809984,
  memoryUsedBytes: 536870912,
  utilizationGpuPercent: 97,
  utilizationMemoryPercent: 61,
  temperatureC: 71,
  powerUsageWatts: 612.5,
  powerLimitWatts: 700,
  smClockMhz: 1980,
  memoryClockMhz: 2619,
  eccCorrectedVolatile: 3,
  eccUncorrectedVolatile: 0,
  eccCorrectedAggregate: 10,
  eccUncorrectedAggregate: 1,
  retiredPages: { multipleSingleBitEcc: 1, doubleBitEcc: 2 },
  remappedRows: { corrected: 4, uncorrected: 1, pending: false, failed: false },
  throttleReasons: { mask: 0x24, reasons: ['sw_power_cap', 'sw_thermal_slowdown'] },
  errors: [],
};

describe('toGpuSample', () => {
  it('maps every reading', () => {
    expect(toGpuSample(full, INITIAL_GPU_HEALTH)).toEqual({
      index: 1,
      uuid: 'GPU-1',
      name: 'NVIDIA H100 80GB HBM3',
      pci_bus_id: '00000000:18:00.0',
      memory_total_bytes: 85520809984,
      memory_used_bytes: 536870912,
      utilization_gpu_percent: 97,
      utilization_memory_percent: 61,
      temperature_c: 71,
      power_usage_w: 612.5,
      power_limit_w: 700,
      sm_clock_mhz: 1980,
      memory_clock_mhz: 2619,
      ecc_corrected: 3,
      ecc_uncorrected: 0,
      retired_pages: 3,
      remapped_rows: 5,
      throttle_reasons: ['sw_power_cap', 'sw_thermal_slowdown'],
      healthy: true,
      health_reason: '',
    });
  });

  it('leaves unsupported values absent, not zero', () => {
    const sample = toGpuSample({ index: 0, uuid: 'GPU-0', name: 'x', errors: [] }, INITIAL_GPU_HEALTH);
    expect(sample).toEqual({ index: 0, uuid: 'GPU-0', name: 'x', pci_bus_id: '', throttle_reasons: [], healthy: true, health_reason: '' });
    expect('temperature_c' in sample).toBe(false);
  });

  it('carries the health verdict', () => {
    const sample = toGpuSample(full, { ...INITIAL_GPU_HEALTH, xid: 79 });
    expect(sample).toMatchObject({ healthy: false, health_reason: 'critical XID 79' });
  });

  it('reports an unreadable GPU as unhealthy with the reason', () => {
    expect(unreadableGpuSample({ index: 2, uuid: 'GPU-2', name: 'n' }, 'GPU is lost')).toMatchObject({
      uuid: 'GPU-2',
      healthy: false,
      health_reason: 'unreadable: GPU is lost',
    });
  });
});
