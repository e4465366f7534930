// NVML return codes (nvmlReturn_t) and the error class every failed NVML call
// becomes. The message is NVML's own nvmlErrorString text, so what an operator
// reads matches nvidia-smi and NVIDIA's documentation.

/** nvmlReturn_t values from nvml.h. */
export const NvmlReturn = {
  SUCCESS: 0,
  ERROR_UNINITIALIZED: 1,
  ERROR_INVALID_ARGUMENT: 2,
  ERROR_NOT_SUPPORTED: 3,
  ERROR_NO_PERMISSION: 4,
  ERROR_ALREADY_INITIALIZED: 5,
  ERROR_NOT_FOUND: 6,
  ERROR_INSUFFICIENT_SIZE: 7,
  ERROR_INSUFFICIENT_POWER: 8,
  ERROR_DRIVER_NOT_LOADED: 9,
  ERROR_TIMEOUT: 10,
  ERROR_IRQ_ISSUE: 11,
  ERROR_LIBRARY_NOT_FOUND: 12,
  ERROR_FUNCTION_NOT_FOUND: 13,
  ERROR_CORRUPTED_INFOROM: 14,
  ERROR_GPU_IS_LOST: 15,
  ERROR_RESET_REQUIRED: 16,
  ERROR_OPERATING_SYSTEM: 17,
  ERROR_LIB_RM_VERSION_MISMATCH: 18,
  ERROR_IN_USE: 19,
  ERROR_MEMORY: 20,
  ERROR_NO_DATA: 21,
  ERROR_VGPU_ECC_NOT_ENABLED: 22,
  ERROR_INSUFFICIENT_RESOURCES: 23,
  ERROR_FREQ_NOT_SUPPORTED: 24,
  ERROR_ARGUMENT_VERSION_MISMATCH: 25,
  ERROR_DEPRECATED: 26,
  ERROR_NOT_READY: 27,
  ERROR_GPU_NOT_FOUND: 28,
  ERROR_INVALID_STATE: 29,
  ERROR_UNKNOWN: 999,
} as const;

const namesByCode = new Map<number, string>(
  Object.entries(NvmlReturn).map(([name, code]) => [code, `NVML_${name}`]),
);

/** "NVML_ERROR_GPU_IS_LOST" for 15; "NVML_RETURN_<n>" for codes newer than this table. */
export function nvmlReturnName(code: number): string {
  return namesByCode.get(code) ?? `NVML_RETURN_${code}`;
}

// Codes after which the GPU or the driver needs a person (reset, reboot,
// reinstall); retrying the call will not help.
const unrecoverable = new Set<number>([
  NvmlReturn.ERROR_DRIVER_NOT_LOADED,
  NvmlReturn.ERROR_LIBRARY_NOT_FOUND,
  NvmlReturn.ERROR_FUNCTION_NOT_FOUND,
  NvmlReturn.ERROR_CORRUPTED_INFOROM,
  NvmlReturn.ERROR_GPU_IS_LOST,
  NvmlReturn.ERROR_RESET_REQUIRED,
  NvmlReturn.ERROR_LIB_RM_VERSION_MISMATCH,
  NvmlReturn.ERROR_GPU_NOT_FOUND,
]);

/** A failed NVML call: which function, NVML's return code and NVML's own error string. */
export class NvmlError extends Error {
  override readonly name = 'NvmlError';
  /** The nvmlReturn_t value. */
  readonly code: number;
  /** e.g. "NVML_ERROR_GPU_IS_LOST". */
  readonly codeName: string;
  /** The NVML function that failed, e.g. "nvmlDeviceGetTemperature". */
  readonly nvmlFunction: string;
  /** nvmlErrorString(code), e.g. "GPU is lost". */
  readonly nvmlMessage: string;
  /** The GPU index the call was about, when it was about one. */
  readonly gpuIndex: number | undefined;

  constructor(nvmlFunction: string, code: number, nvmlMessage: string, gpuIndex?: number) {
    const where = gpuIndex === undefined ? nvmlFunction : `${nvmlFunction} (GPU ${gpuIndex})`;
    super(`${where}: ${nvmlMessage} [${nvmlReturnName(code)}]`);
    this.code = code;
    this.codeName = nvmlReturnName(code);
    this.nvmlFunction = nvmlFunction;
    this.nvmlMessage = nvmlMessage;
    this.gpuIndex = gpuIndex;
  }

  /** False when the GPU or driver is gone or broken (lost, reset required, ...). */
  get recoverable(): boolean {
    return !unrecoverable.has(this.code);
  }
}
