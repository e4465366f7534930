// The low-level driver: opens libnvidia-ml.so.1 with koffi at run time and binds
// the NVML C functions with their nvml.h names and signatures. It knows nothing of
// readings or events; it only turns return codes into NvmlError.
//
// koffi 3 notes: pointers (nvmlDevice_t, nvmlEventSet_t) come back as bigint
// (null for NULL); unsigned long long comes back as a number when it is a safe
// integer and as a bigint above 2^53; out-parameters are one-element arrays or,
// for structs, plain objects. Types are anonymous on purpose: koffi keeps named
// types in one registry per process, and a second openNvml() must not redefine them.
import koffi from 'koffi';
import type { KoffiFunc, LibraryHandle } from 'koffi';
import { NvmlError, NvmlReturn } from './nvml-error.js';

/** nvmlDevice_t / nvmlEventSet_t: an opaque pointer, as koffi 3 hands it over. */
export type NvmlHandle = bigint;
/** An unsigned long long as koffi returns it. */
export type U64 = number | bigint;
/** A one-element array koffi fills for a pointer out-parameter. */
export type Out<T> = [T];

const opaquePointer = koffi.pointer(koffi.opaque());
const outUint = koffi.out(koffi.pointer('unsigned int'));
const outInt = koffi.out(koffi.pointer('int'));
const outU64 = koffi.out(koffi.pointer('unsigned long long'));

const nvmlMemory = koffi.struct({
  total: 'unsigned long long',
  free: 'unsigned long long',
  used: 'unsigned long long',
});
const nvmlUtilization = koffi.struct({ gpu: 'unsigned int', memory: 'unsigned int' });
const nvmlPciInfo = koffi.struct({
  busIdLegacy: koffi.array('char', 16, 'String'),
  domain: 'unsigned int',
  bus: 'unsigned int',
  device: 'unsigned int',
  pciDeviceId: 'unsigned int',
  pciSubSystemId: 'unsigned int',
  busId: koffi.array('char', 32, 'String'),
});
const nvmlEventData = koffi.struct({
  device: opaquePointer,
  eventType: 'unsigned long long',
  eventData: 'unsigned long long',
  gpuInstanceId: 'unsigned int',
  computeInstanceId: 'unsigned int',
});

// nvmlFieldValue_t; its value union (8 bytes) is read as one unsigned long long, whose low
// 32 bits are uiVal on the little-endian hosts NVML ships for.
const nvmlFieldValue = koffi.struct({
  fieldId: 'unsigned int',
  scopeId: 'unsigned int',
  timestamp: 'long long',
  latencyUsec: 'long long',
  valueType: 'int',
  nvmlReturn: 'int',
  value: 'unsigned long long',
});

export interface NvmlFieldValue {
  fieldId: number;
  scopeId: number;
  timestamp: U64;
  latencyUsec: U64;
  valueType: number;
  nvmlReturn: number;
  value: U64;
}

export interface NvmlMemory { total: U64; free: U64; used: U64 }
export interface NvmlUtilization { gpu: number; memory: number }
export interface NvmlPciInfo { busIdLegacy: string; domain: number; bus: number; device: number; busId: string }
export interface NvmlEventData {
  device: NvmlHandle | null;
  eventType: U64;
  eventData: U64;
  gpuInstanceId: number;
  computeInstanceId: number;
}

type Fn<T extends (...args: never[]) => number | string> = KoffiFunc<T>;
type DeviceOut<T> = Fn<(device: NvmlHandle, out: Out<T>) => number>;

/** The NVML entry points this package calls. Optional ones are missing from older drivers. */
export interface NvmlFunctions {
  nvmlInit_v2: Fn<() => number>;
  nvmlShutdown: Fn<() => number>;
  nvmlErrorString: Fn<(code: number) => string>;
  nvmlSystemGetDriverVersion: Fn<(version: Buffer, length: number) => number>;
  nvmlSystemGetCudaDriverVersion_v2?: Fn<(version: Out<number>) => number>;
  nvmlDeviceGetCount_v2: Fn<(count: Out<number>) => number>;
  nvmlDeviceGetHandleByIndex_v2: Fn<(index: number, device: Out<NvmlHandle | null>) => number>;
  nvmlDeviceGetName: Fn<(device: NvmlHandle, name: Buffer, length: number) => number>;
  nvmlDeviceGetUUID: Fn<(device: NvmlHandle, uuid: Buffer, length: number) => number>;
  nvmlDeviceGetPciInfo_v3?: Fn<(device: NvmlHandle, pci: Partial<NvmlPciInfo>) => number>;
  nvmlDeviceGetMemoryInfo?: Fn<(device: NvmlHandle, memory: Partial<NvmlMemory>) => number>;
  nvmlDeviceGetUtilizationRates?: Fn<(device: NvmlHandle, util: Partial<NvmlUtilization>) => number>;
  nvmlDeviceGetTemperature?: Fn<(device: NvmlHandle, sensor: number, temp: Out<number>) => number>;
  nvmlDeviceGetPowerUsage?: DeviceOut<number>;
  nvmlDeviceGetEnforcedPowerLimit?: DeviceOut<number>;
  nvmlDeviceGetClockInfo?: Fn<(device: NvmlHandle, type: number, clock: Out<number>) => number>;
  nvmlDeviceGetTotalEccErrors?: Fn<
    (device: NvmlHandle, errorType: number, counterType: number, count: Out<U64>) => number
  >;
  nvmlDeviceGetRetiredPages?: Fn<
    (device: NvmlHandle, cause: number, pageCount: Out<number>, addresses: null) => number
  >;
  nvmlDeviceGetRemappedRows?: Fn<
    (device: NvmlHandle, corr: Out<number>, unc: Out<number>, pending: Out<number>, failure: Out<number>) => number
  >;
  nvmlDeviceGetCurrentClocksEventReasons?: DeviceOut<U64>;
  nvmlDeviceGetCurrentClocksThrottleReasons?: DeviceOut<U64>;
  nvmlDeviceGetSupportedEventTypes?: DeviceOut<U64>;
  nvmlDeviceGetFieldValues?: Fn<(device: NvmlHandle, count: number, values: Partial<NvmlFieldValue>) => number>;
  nvmlEventSetCreate: Fn<(set: Out<NvmlHandle | null>) => number>;
  nvmlDeviceRegisterEvents: Fn<(device: NvmlHandle, eventTypes: number, set: NvmlHandle) => number>;
  nvmlEventSetWait_v2: Fn<(set: NvmlHandle, data: Partial<NvmlEventData>, timeoutMs: number) => number>;
  nvmlEventSetFree: Fn<(set: NvmlHandle) => number>;
}

type KoffiType = Parameters<typeof koffi.out>[0];
type Signature = [result: KoffiType, params: KoffiType[]];
const dev = opaquePointer;

const required = {
  nvmlInit_v2: ['int', []],
  nvmlShutdown: ['int', []],
  nvmlErrorString: ['const char *', ['int']],
  nvmlSystemGetDriverVersion: ['int', ['uint8_t *', 'unsigned int']],
  nvmlDeviceGetCount_v2: ['int', [outUint]],
  nvmlDeviceGetHandleByIndex_v2: ['int', ['unsigned int', koffi.out(koffi.pointer(opaquePointer))]],
  nvmlDeviceGetName: ['int', [dev, 'uint8_t *', 'unsigned int']],
  nvmlDeviceGetUUID: ['int', [dev, 'uint8_t *', 'unsigned int']],
  nvmlEventSetCreate: ['int', [koffi.out(koffi.pointer(opaquePointer))]],
  nvmlDeviceRegisterEvents: ['int', [dev, 'unsigned long long', opaquePointer]],
  nvmlEventSetWait_v2: ['int', [opaquePointer, koffi.out(koffi.pointer(nvmlEventData)), 'unsigned int']],
  nvmlEventSetFree: ['int', [opaquePointer]],
} satisfies Record<string, Signature>;

const optional = {
  nvmlSystemGetCudaDriverVersion_v2: ['int', [outInt]],
  nvmlDeviceGetPciInfo_v3: ['int', [dev, koffi.out(koffi.pointer(nvmlPciInfo))]],
  nvmlDeviceGetMemoryInfo: ['int', [dev, koffi.out(koffi.pointer(nvmlMemory))]],
  nvmlDeviceGetUtilizationRates: ['int', [dev, koffi.out(koffi.pointer(nvmlUtilization))]],
  nvmlDeviceGetTemperature: ['int', [dev, 'int', outUint]],
  nvmlDeviceGetPowerUsage: ['int', [dev, outUint]],
  nvmlDeviceGetEnforcedPowerLimit: ['int', [dev, outUint]],
  nvmlDeviceGetClockInfo: ['int', [dev, 'int', outUint]],
  nvmlDeviceGetTotalEccErrors: ['int', [dev, 'int', 'int', outU64]],
  nvmlDeviceGetRetiredPages: ['int', [dev, 'int', koffi.inout(koffi.pointer('unsigned int')), 'unsigned long long *']],
  nvmlDeviceGetRemappedRows: ['int', [dev, outUint, outUint, outUint, outUint]],
  nvmlDeviceGetCurrentClocksEventReasons: ['int', [dev, outU64]],
  nvmlDeviceGetCurrentClocksThrottleReasons: ['int', [dev, outU64]],
  nvmlDeviceGetSupportedEventTypes: ['int', [dev, outU64]],
  nvmlDeviceGetFieldValues: ['int', [dev, 'int', koffi.inout(koffi.pointer(nvmlFieldValue))]],
} satisfies Record<string, Signature>;

/** An opened NVML library (not yet initialised) with its bound functions. */
export class NvmlLibrary {
  private constructor(
    readonly path: string,
    private readonly handle: LibraryHandle,
    readonly fn: NvmlFunctions,
  ) {}

  /**
   * dlopen() `path` and bind the functions. Throws a plain Error naming the path
   * when the library cannot be loaded or lacks a required symbol.
   */
  static open(path: string): NvmlLibrary {
    const handle = koffi.load(path);
    try {
      const fn: Record<string, unknown> = {};
      for (const [name, [result, params]] of Object.entries(required)) {
        fn[name] = handle.func(name, result, params);
      }
      for (const [name, [result, params]] of Object.entries(optional)) {
        // A driver too old for a symbol leaves that field absent, like NOT_SUPPORTED.
        try {
          fn[name] = handle.func(name, result, params);
        } catch {
          fn[name] = undefined;
        }
      }
      return new NvmlLibrary(path, handle, fn as unknown as NvmlFunctions);
    } catch (err) {
      handle.unload();
      throw err;
    }
  }

  /** An NvmlError for `code`, with NVML's own error string. */
  error(nvmlFunction: string, code: number, gpuIndex?: number): NvmlError {
    return new NvmlError(nvmlFunction, code, this.fn.nvmlErrorString(code), gpuIndex);
  }

  /** Throws NvmlError unless `code` is NVML_SUCCESS. */
  check(nvmlFunction: string, code: number, gpuIndex?: number): void {
    if (code !== NvmlReturn.SUCCESS) throw this.error(nvmlFunction, code, gpuIndex);
  }

  unload(): void {
    this.handle.unload();
  }
}

/** A NUL-terminated C string out of a byte buffer NVML filled. */
export function cString(buffer: Buffer): string {
  const end = buffer.indexOf(0);
  return buffer.toString('utf8', 0, end === -1 ? buffer.length : end);
}

/** unsigned long long as a JS number (counts and bitmasks here stay far below 2^53). */
export function toNumber(value: U64): number {
  return typeof value === 'bigint' ? Number(value) : value;
}
