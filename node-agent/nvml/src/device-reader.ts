// Reads one GPU into a GpuReading. Identity (handle, UUID, name) must succeed or
// the whole read throws; every other field is independent: NOT_SUPPORTED (or a
// function the driver lacks) leaves it absent, any other NVML error leaves it
// absent and is recorded in `errors`.
import { NvmlError, NvmlReturn } from './nvml-error.js';
import {
  cString,
  toNumber,
  type NvmlFieldValue,
  type NvmlHandle,
  type NvmlLibrary,
  type NvmlMemory,
  type NvmlPciInfo,
  type NvmlUtilization,
  type Out,
  type U64,
} from './nvml-library.js';
import { decodeThrottleReasons } from './throttle-reasons.js';
import type { GpuField, GpuFieldError, GpuReading } from './types.js';

// Buffer sizes from nvml.h (NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE).
const NAME_BUFFER = 96;
const UUID_BUFFER = 96;

const TEMPERATURE_GPU = 0; // nvmlTemperatureSensors_t
const CLOCK_SM = 1; // nvmlClockType_t
const CLOCK_MEM = 2;
const ECC_CORRECTED = 0; // nvmlMemoryErrorType_t
const ECC_UNCORRECTED = 1;
const ECC_VOLATILE = 0; // nvmlEccCounterType_t
const ECC_AGGREGATE = 1;
const RETIRED_MULTIPLE_SINGLE_BIT = 0; // nvmlPageRetirementCause_t
const RETIRED_DOUBLE_BIT = 1;

/**
 * True when an NVML call succeeded, false when the GPU does not support it
 * (NOT_SUPPORTED, or `rc` undefined because the driver lacks the function);
 * throws NvmlError for any other return code.
 */
function supported(lib: NvmlLibrary, nvmlFunction: string, rc: number | undefined, index: number): boolean {
  if (rc === undefined || rc === NvmlReturn.ERROR_NOT_SUPPORTED) return false;
  lib.check(nvmlFunction, rc, index);
  return true;
}

export function getDeviceHandle(lib: NvmlLibrary, index: number): NvmlHandle {
  const out: Out<NvmlHandle | null> = [null];
  lib.check('nvmlDeviceGetHandleByIndex_v2', lib.fn.nvmlDeviceGetHandleByIndex_v2(index, out), index);
  if (out[0] === null) throw lib.error('nvmlDeviceGetHandleByIndex_v2', NvmlReturn.ERROR_UNKNOWN, index);
  return out[0];
}

export function readUuid(lib: NvmlLibrary, device: NvmlHandle, index: number): string {
  const buffer = Buffer.alloc(UUID_BUFFER);
  lib.check('nvmlDeviceGetUUID', lib.fn.nvmlDeviceGetUUID(device, buffer, buffer.length), index);
  return cString(buffer);
}

export function readDevice(lib: NvmlLibrary, index: number): GpuReading {
  const device = getDeviceHandle(lib, index);
  const nameBuffer = Buffer.alloc(NAME_BUFFER);
  lib.check('nvmlDeviceGetName', lib.fn.nvmlDeviceGetName(device, nameBuffer, nameBuffer.length), index);

  const reading: Omit<GpuReading, 'errors'> = { index, uuid: readUuid(lib, device, index), name: cString(nameBuffer) };
  const errors: GpuFieldError[] = [];
  const fn = lib.fn;
  const ok = (nvmlFunction: string, rc: number | undefined) => supported(lib, nvmlFunction, rc, index);
  // One field per NVML call: its NvmlError lands in reading.errors and the other
  // fields are still read; anything that is not an NvmlError is a bug and is thrown.
  const field = (name: GpuField, read: () => void): void => {
    try {
      read();
    } catch (err) {
      if (!(err instanceof NvmlError)) throw err;
      errors.push({ field: name, error: err });
    }
  };

  field('pciBusId', () => {
    const pci: Partial<NvmlPciInfo> = {};
    if (ok('nvmlDeviceGetPciInfo_v3', fn.nvmlDeviceGetPciInfo_v3?.(device, pci))) reading.pciBusId = pci.busId;
  });
  field('memory', () => {
    const memory: Partial<NvmlMemory> = {};
    if (ok('nvmlDeviceGetMemoryInfo', fn.nvmlDeviceGetMemoryInfo?.(device, memory))) {
      reading.memoryTotalBytes = toNumber(memory.total ?? 0);
      reading.memoryUsedBytes = toNumber(memory.used ?? 0);
    }
  });
  field('utilization', () => {
    const util: Partial<NvmlUtilization> = {};
    if (ok('nvmlDeviceGetUtilizationRates', fn.nvmlDeviceGetUtilizationRates?.(device, util))) {
      reading.utilizationGpuPercent = util.gpu;
      reading.utilizationMemoryPercent = util.memory;
    }
  });
  field('temperatureC', () => {
    const out: Out<number> = [0];
    if (ok('nvmlDeviceGetTemperature', fn.nvmlDeviceGetTemperature?.(device, TEMPERATURE_GPU, out))) {
      reading.temperatureC = out[0];
    }
  });
  // NVML reports power in milliwatts.
  field('powerUsageWatts', () => {
    const out: Out<number> = [0];
    if (ok('nvmlDeviceGetPowerUsage', fn.nvmlDeviceGetPowerUsage?.(device, out))) reading.powerUsageWatts = out[0] / 1000;
  });
  field('powerLimitWatts', () => {
    const out: Out<number> = [0];
    if (ok('nvmlDeviceGetEnforcedPowerLimit', fn.nvmlDeviceGetEnforcedPowerLimit?.(device, out))) {
      reading.powerLimitWatts = out[0] / 1000;
    }
  });
  field('smClockMhz', () => {
    const out: Out<number> = [0];
    if (ok('nvmlDeviceGetClockInfo', fn.nvmlDeviceGetClockInfo?.(device, CLOCK_SM, out))) reading.smClockMhz = out[0];
  });
  field('memoryClockMhz', () => {
    const out: Out<number> = [0];
    if (ok('nvmlDeviceGetClockInfo', fn.nvmlDeviceGetClockInfo?.(device, CLOCK_MEM, out))) reading.memoryClockMhz = out[0];
  });

  const eccCounters = [
    ['eccCorrectedVolatile', ECC_CORRECTED, ECC_VOLATILE],
    ['eccUncorrectedVolatile', ECC_UNCORRECTED, ECC_VOLATILE],
    ['eccCorrectedAggregate', ECC_CORRECTED, ECC_AGGREGATE],
    ['eccUncorrectedAggregate', ECC_UNCORRECTED, ECC_AGGREGATE],
  ] as const;
  for (const [name, errorType, counterType] of eccCounters) {
    field(name, () => {
      const out: Out<U64> = [0];
      if (ok('nvmlDeviceGetTotalEccErrors', fn.nvmlDeviceGetTotalEccErrors?.(device, errorType, counterType, out))) {
        reading[name] = toNumber(out[0]);
      }
    });
  }

  field('retiredPages', () => {
    // A zero-sized query: NVML answers INSUFFICIENT_SIZE with the count filled in
    // when there are pages, SUCCESS when there are none.
    const count = (cause: number): number | undefined => {
      const out: Out<number> = [0];
      let rc = fn.nvmlDeviceGetRetiredPages?.(device, cause, out, null);
      if (rc === NvmlReturn.ERROR_INSUFFICIENT_SIZE) rc = NvmlReturn.SUCCESS;
      return ok('nvmlDeviceGetRetiredPages', rc) ? out[0] : undefined;
    };
    const multipleSingleBitEcc = count(RETIRED_MULTIPLE_SINGLE_BIT);
    const doubleBitEcc = count(RETIRED_DOUBLE_BIT);
    if (multipleSingleBitEcc !== undefined && doubleBitEcc !== undefined) {
      reading.retiredPages = { multipleSingleBitEcc, doubleBitEcc };
    }
  });
  field('remappedRows', () => {
    const corr: Out<number> = [0], unc: Out<number> = [0], pending: Out<number> = [0], failure: Out<number> = [0];
    if (ok('nvmlDeviceGetRemappedRows', fn.nvmlDeviceGetRemappedRows?.(device, corr, unc, pending, failure))) {
      reading.remappedRows = { corrected: corr[0], uncorrected: unc[0], pending: pending[0] !== 0, failed: failure[0] !== 0 };
    }
  });
  field('throttleReasons', () => {
    // Drivers from 535 name it ClocksEventReasons; older ones only have ClocksThrottleReasons.
    const out: Out<U64> = [0];
    const rc = fn.nvmlDeviceGetCurrentClocksEventReasons
      ? ok('nvmlDeviceGetCurrentClocksEventReasons', fn.nvmlDeviceGetCurrentClocksEventReasons(device, out))
      : ok('nvmlDeviceGetCurrentClocksThrottleReasons', fn.nvmlDeviceGetCurrentClocksThrottleReasons?.(device, out));
    if (rc) {
      const mask = toNumber(out[0]);
      reading.throttleReasons = { mask, reasons: decodeThrottleReasons(mask) };
    }
  });

  return { ...reading, errors };
}

/** NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (nvml.h field id 230). */
export const FI_DEV_GET_GPU_RECOVERY_ACTION = 230;

/**
 * The driver's recovery action for the GPU (nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU
 * reset, 2 node reboot, 3 drain P2P, 4 drain and reset), read with nvmlDeviceGetFieldValues;
 * undefined where the driver lacks the call or the field (drivers before R565).
 */
export function readRecoveryAction(lib: NvmlLibrary, index: number): number | undefined {
  const getFieldValues = lib.fn.nvmlDeviceGetFieldValues;
  if (!getFieldValues) return undefined;
  const device = getDeviceHandle(lib, index);
  const value: Partial<NvmlFieldValue> = { fieldId: FI_DEV_GET_GPU_RECOVERY_ACTION, scopeId: 0, timestamp: 0, latencyUsec: 0, valueType: 0, nvmlReturn: 0, value: 0 };
  if (!supported(lib, 'nvmlDeviceGetFieldValues', getFieldValues(device, 1, value), index)) return undefined;
  if (!supported(lib, 'nvmlDeviceGetFieldValues(GPU_RECOVERY_ACTION)', value.nvmlReturn, index)) return undefined;
  return toNumber(value.value ?? 0) % 2 ** 32;
}
