// openNvml(): the high-level client. It loads the library, calls nvmlInit_v2
// once and nvmlShutdown on close(), and answers "no GPUs, and here is why"
// instead of throwing when there is no usable NVML (a laptop, CI, a host whose
// driver is not loaded).
import { readDevice, readRecoveryAction } from './device-reader.js';
import { watchEvents, type WatchHost } from './event-watch.js';
import { NvmlError, NvmlReturn } from './nvml-error.js';
import { cString, NvmlLibrary, type Out } from './nvml-library.js';
import type { DeviceReadings, GpuReading, Nvml, NvmlEvent, OpenNvmlOptions, WatchEventsOptions } from './types.js';

/** The soname the NVIDIA driver installs; found through the dynamic loader's search path. */
export const DEFAULT_NVML_LIBRARY = 'libnvidia-ml.so.1';

// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE in nvml.h.
const DRIVER_VERSION_BUFFER = 80;

/** Opens NVML. Never throws: check `available` / `unavailableReason`. */
export function openNvml(options: OpenNvmlOptions = {}): Nvml {
  const libraryPath = options.libraryPath ?? DEFAULT_NVML_LIBRARY;
  let lib: NvmlLibrary;
  try {
    lib = NvmlLibrary.open(libraryPath);
  } catch (err) {
    return new UnavailableNvml(libraryPath, `cannot load ${libraryPath}: ${(err as Error).message}`);
  }
  const rc = lib.fn.nvmlInit_v2();
  if (rc !== NvmlReturn.SUCCESS) {
    const reason = `${libraryPath}: ${lib.error('nvmlInit_v2', rc).message}`;
    lib.unload();
    return new UnavailableNvml(libraryPath, reason);
  }
  return new LoadedNvml(lib);
}

class LoadedNvml implements Nvml {
  readonly available = true;
  readonly unavailableReason = undefined;
  private readonly closing = new AbortController();
  /** Event sets waiting for their in-flight native wait before being freed. */
  private readonly releases = new Set<Promise<void>>();
  private closed: Promise<void> | undefined;
  private shutDown = false;

  constructor(private readonly lib: NvmlLibrary) {}

  get libraryPath(): string {
    return this.lib.path;
  }

  driverVersion(): string {
    this.assertOpen();
    const buffer = Buffer.alloc(DRIVER_VERSION_BUFFER);
    this.lib.check('nvmlSystemGetDriverVersion', this.lib.fn.nvmlSystemGetDriverVersion(buffer, buffer.length));
    return cString(buffer);
  }

  cudaVersion(): string | undefined {
    this.assertOpen();
    const out: Out<number> = [0];
    const rc = this.lib.fn.nvmlSystemGetCudaDriverVersion_v2?.(out);
    if (rc === undefined || rc === NvmlReturn.ERROR_NOT_SUPPORTED) return undefined;
    this.lib.check('nvmlSystemGetCudaDriverVersion_v2', rc);
    // NVML encodes 12.4 as 12040 (1000 * major + 10 * minor).
    return `${Math.floor(out[0] / 1000)}.${Math.floor((out[0] % 1000) / 10)}`;
  }

  deviceCount(): number {
    this.assertOpen();
    const out: Out<number> = [0];
    this.lib.check('nvmlDeviceGetCount_v2', this.lib.fn.nvmlDeviceGetCount_v2(out));
    return out[0];
  }

  readDevice(index: number): GpuReading {
    this.assertOpen();
    return readDevice(this.lib, index);
  }

  gpuRecoveryAction(index: number): number | undefined {
    this.assertOpen();
    return readRecoveryAction(this.lib, index);
  }

  readDevices(): DeviceReadings {
    const result: DeviceReadings = { gpus: [], failed: [] };
    const count = this.deviceCount();
    for (let index = 0; index < count; index++) {
      try {
        result.gpus.push(readDevice(this.lib, index));
      } catch (err) {
        if (!(err instanceof NvmlError)) throw err;
        result.failed.push({ index, error: err });
      }
    }
    return result;
  }

  watchEvents(options?: WatchEventsOptions): AsyncIterable<NvmlEvent> {
    this.assertOpen();
    const host: WatchHost = {
      closing: this.closing.signal,
      releaseEventSet: (set, after) => {
        const release = after
          .catch(() => undefined) // a failed wait still leaves the set to free
          .then(() => {
            // After nvmlShutdown the library may be unloaded; calling into it would crash.
            if (!this.shutDown) this.lib.fn.nvmlEventSetFree(set);
          })
          .finally(() => this.releases.delete(release));
        this.releases.add(release);
      },
    };
    return watchEvents(this.lib, host, options);
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      this.closing.abort();
      // Let aborted watches reach their finally blocks, then wait for their native waits.
      // A watch parked at a `yield` releases its set only when next pulled: by then
      // shutDown is set and it skips the free (nvmlShutdown ends the set anyway).
      await new Promise((resolve) => setImmediate(resolve));
      await Promise.all(this.releases);
      this.shutDown = true;
      this.lib.fn.nvmlShutdown();
      this.lib.unload();
    })();
    return this.closed;
  }

  private assertOpen(): void {
    // Calling into an unloaded library would crash the process, so refuse here.
    if (this.closed) {
      throw new NvmlError('nvml', NvmlReturn.ERROR_UNINITIALIZED, 'NVML handle is closed');
    }
  }
}

class UnavailableNvml implements Nvml {
  readonly available = false;

  constructor(
    readonly libraryPath: string,
    readonly unavailableReason: string,
  ) {}

  driverVersion(): undefined {
    return undefined;
  }

  cudaVersion(): undefined {
    return undefined;
  }

  deviceCount(): number {
    return 0;
  }

  readDevice(index: number): GpuReading {
    throw new NvmlError('nvmlDeviceGetHandleByIndex_v2', NvmlReturn.ERROR_LIBRARY_NOT_FOUND, this.unavailableReason, index);
  }

  gpuRecoveryAction(): undefined {
    return undefined;
  }

  readDevices(): DeviceReadings {
    return { gpus: [], failed: [] };
  }

  async *watchEvents(): AsyncGenerator<NvmlEvent, void, undefined> {
    // No GPUs, no events.
  }

  async close(): Promise<void> {}
}
