// GpuReading (node-nvml-bindings) + the health verdict -> the protocol's GpuSample, as pure
// functions. Values NVML does not support stay absent (proto3 optional), never 0.
import type { GpuSample } from '@svc/proto';
import type { GpuReading } from 'node-nvml-bindings';
import { healthReason, isHealthy, type GpuHealthState } from '../health/health-policy.js';

export function toGpuSample(reading: GpuReading, health: GpuHealthState): GpuSample {
  const sample: GpuSample = {
    index: reading.index,
    uuid: reading.uuid,
    name: reading.name,
    pci_bus_id: reading.pciBusId ?? '',
    throttle_reasons: reading.throttleReasons?.reasons ?? [],
    healthy: isHealthy(health),
    health_reason: healthReason(health),
  };
  setIfDefined(sample, 'memory_total_bytes', reading.memoryTotalBytes);
  setIfDefined(sample, 'memory_used_bytes', reading.memoryUsedBytes);
  setIfDefined(sample, 'utilization_gpu_percent', reading.utilizationGpuPercent);
  setIfDefined(sample, 'utilization_memory_percent', reading.utilizationMemoryPercent);
  setIfDefined(sample, 'temperature_c', reading.temperatureC);
  setIfDefined(sample, 'power_usage_w', reading.powerUsageWatts);
  setIfDefined(sample, 'power_limit_w', reading.powerLimitWatts);
  setIfDefined(sample, 'sm_clock_mhz', reading.smClockMhz);
  setIfDefined(sample, 'memory_clock_mhz', reading.memoryClockMhz);
  // Since the driver loaded (or the GPU was last reset): the counts the health policy watches.
  setIfDefined(sample, 'ecc_corrected', reading.eccCorrectedVolatile);
  setIfDefined(sample, 'ecc_uncorrected', reading.eccUncorrectedVolatile);
  if (reading.retiredPages) {
    sample.retired_pages = reading.retiredPages.multipleSingleBitEcc + reading.retiredPages.doubleBitEcc;
  }
  if (reading.remappedRows) {
    sample.remapped_rows = reading.remappedRows.corrected + reading.remappedRows.uncorrected;
  }
  return sample;
}

/** A GPU NVML cannot read right now (e.g. fallen off the bus): identity only, unhealthy. */
export function unreadableGpuSample(known: { index: number; uuid: string; name: string }, reason: string): GpuSample {
  return {
    index: known.index,
    uuid: known.uuid,
    name: known.name,
    pci_bus_id: '',
    throttle_reasons: [],
    healthy: false,
    health_reason: `unreadable: ${reason}`,
  };
}

function setIfDefined<K extends keyof GpuSample>(sample: GpuSample, key: K, value: GpuSample[K] | undefined): void {
  if (value !== undefined) sample[key] = value;
}
