// The package's public shapes: what one GPU reads as, what the event watch
// yields, and the Nvml handle itself. A value NVML does not support on a GPU
// (NVML_ERROR_NOT_SUPPORTED, or a function the driver lacks) is absent, never 0.
import type { NvmlError } from './nvml-error.js';
import type { ThrottleReason } from './throttle-reasons.js';

/** One GPU at one moment. Optional fields are absent when NVML does not support them. */
export interface GpuReading {
  /** NVML index (the order nvidia-smi lists GPUs in). */
  index: number;
  /** "GPU-xxxxxxxx-...": the identity to use across restarts and for Docker device requests. */
  uuid: string;
  /** e.g. "NVIDIA H100 80GB HBM3". */
  name: string;
  /** e.g. "00000000:18:00.0". */
  pciBusId?: string;
  memoryTotalBytes?: number;
  memoryUsedBytes?: number;
  /** Percent of time a kernel ran over the last sample period. */
  utilizationGpuPercent?: number;
  /** Percent of time device memory was read or written over the last sample period. */
  utilizationMemoryPercent?: number;
  temperatureC?: number;
  powerUsageWatts?: number;
  /** The enforced power limit. */
  powerLimitWatts?: number;
  smClockMhz?: number;
  memoryClockMhz?: number;
  /** ECC error counts since the driver loaded. */
  eccCorrectedVolatile?: number;
  eccUncorrectedVolatile?: number;
  /** ECC error counts over the GPU's lifetime. */
  eccCorrectedAggregate?: number;
  eccUncorrectedAggregate?: number;
  /** Pages retired (pre-Ampere GPUs; Ampere and later report remappedRows instead). */
  retiredPages?: { multipleSingleBitEcc: number; doubleBitEcc: number };
  /** Row remapping (Ampere and later). */
  remappedRows?: { corrected: number; uncorrected: number; pending: boolean; failed: boolean };
  /** Why clocks are below their maximum right now. */
  throttleReasons?: { mask: number; reasons: ThrottleReason[] };
  /**
   * Fields NVML failed to read with an error other than NOT_SUPPORTED. The field
   * is absent from the reading and its error is here, so nothing is lost silently.
   */
  errors: GpuFieldError[];
}

/** Optional GpuReading fields; some come from one NVML call together (memory, ECC). */
export type GpuField =
  | 'pciBusId'
  | 'memory'
  | 'utilization'
  | 'temperatureC'
  | 'powerUsageWatts'
  | 'powerLimitWatts'
  | 'smClockMhz'
  | 'memoryClockMhz'
  | 'eccCorrectedVolatile'
  | 'eccUncorrectedVolatile'
  | 'eccCorrectedAggregate'
  | 'eccUncorrectedAggregate'
  | 'retiredPages'
  | 'remappedRows'
  | 'throttleReasons';

export interface GpuFieldError {
  field: GpuField;
  error: NvmlError;
}

/** A GPU that could not be identified (handle, UUID or name failed), e.g. one fallen off the bus. */
export interface GpuReadFailure {
  index: number;
  error: NvmlError;
}

export interface DeviceReadings {
  gpus: GpuReading[];
  failed: GpuReadFailure[];
}

export type NvmlEventType = 'xid' | 'ecc_single' | 'ecc_double';

export interface NvmlEvent {
  type: NvmlEventType;
  /** The GPU, as registered when the watch started; absent only if NVML names a device it was not asked about. */
  index?: number;
  uuid?: string;
  /** The XID number (type 'xid' only), e.g. 79 "GPU has fallen off the bus". */
  xid?: number;
  /** NVML's raw eventData. */
  data: number;
}

export interface WatchEventsOptions {
  /**
   * How long one nvmlEventSetWait_v2 call blocks (default 1000 ms). The call
   * runs on a koffi worker thread and cannot be interrupted, so this also bounds
   * how long an aborted watch holds that thread and its event set.
   */
  timeoutMs?: number;
  /** Ends the iteration (cleanly, without throwing). */
  signal?: AbortSignal;
  /** Event types to register (default all three); a GPU is only asked for what it supports. */
  types?: NvmlEventType[];
  /** GPU indices to watch (default all), e.g. to leave out one that fails registration. */
  devices?: number[];
}

export interface OpenNvmlOptions {
  /** Path or soname of the NVML library (default "libnvidia-ml.so.1"; the agent passes SVC_NVML_LIBRARY). */
  libraryPath?: string;
}

/**
 * An NVML session: nvmlInit_v2 when opened, nvmlShutdown on close(). When the
 * library cannot be loaded or initialised, `available` is false, the reason says
 * why, and the handle reports zero GPUs instead of throwing.
 */
export interface Nvml {
  readonly available: boolean;
  /** Why NVML is unavailable; undefined when it is available. */
  readonly unavailableReason: string | undefined;
  /** The library path that was (or failed to be) opened. */
  readonly libraryPath: string;
  /** nvmlSystemGetDriverVersion, e.g. "550.54.15"; undefined when unavailable. */
  driverVersion(): string | undefined;
  /** nvmlSystemGetCudaDriverVersion_v2 as "major.minor", e.g. "12.4"; undefined when unavailable or unsupported. */
  cudaVersion(): string | undefined;
  /** Number of GPUs NVML sees; 0 when unavailable. */
  deviceCount(): number;
  /** Reads one GPU. Throws NvmlError when it cannot be identified. */
  readDevice(index: number): GpuReading;
  /**
   * The driver's recovery action for a GPU (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: 0 none,
   * 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset); undefined where the
   * driver does not report it. Throws NvmlError when the GPU cannot be found.
   */
  gpuRecoveryAction(index: number): number | undefined;
  /** Reads every GPU; one that cannot be identified lands in `failed` instead of stopping the rest. */
  readDevices(): DeviceReadings;
  /**
   * XID and ECC events, without blocking the event loop. Iteration ends when the
   * signal aborts or close() is called; an NVML failure other than a timeout is
   * thrown as NvmlError. When NVML is unavailable it ends at once.
   */
  watchEvents(options?: WatchEventsOptions): AsyncIterable<NvmlEvent>;
  /** Ends running watches, waits for their native calls, then nvmlShutdown. Safe to repeat. */
  close(): Promise<void>;
}
