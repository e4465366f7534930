// The XID / ECC event watch: one NVML event set per watch, registered for every
// GPU (or the ones asked for), and nvmlEventSetWait_v2 called through koffi's
// `.async` so the blocking wait runs on a worker thread, never the event loop.
// The native wait cannot be interrupted: an abort ends the iteration at once and
// the event set is freed when the wait in flight returns (at most timeoutMs later).
import { NvmlReturn } from './nvml-error.js';
import { toNumber, type NvmlEventData, type NvmlHandle, type NvmlLibrary, type Out, type U64 } from './nvml-library.js';
import { getDeviceHandle, readUuid } from './device-reader.js';
import type { NvmlEvent, NvmlEventType, WatchEventsOptions } from './types.js';

/** nvmlEventType* bits from nvml.h. */
export const nvmlEventTypeBits: Record<NvmlEventType, number> = {
  ecc_single: 0x1, // nvmlEventTypeSingleBitEccError
  ecc_double: 0x2, // nvmlEventTypeDoubleBitEccError
  xid: 0x8, // nvmlEventTypeXidCriticalError
};

const DEFAULT_TIMEOUT_MS = 1000;

/** What the owning Nvml lends a watch. */
export interface WatchHost {
  /** Aborted by close(). */
  closing: AbortSignal;
  /**
   * Frees `set` once `after` settles (the native wait using it), unless NVML was
   * shut down by then; close() waits for this before nvmlShutdown.
   */
  releaseEventSet(set: NvmlHandle, after: Promise<unknown>): void;
}

interface Watched {
  index: number;
  uuid: string;
}

interface WaitResult {
  rc: number;
  data: Partial<NvmlEventData>;
}

const aborted = Symbol('aborted');

export async function* watchEvents(
  lib: NvmlLibrary,
  host: WatchHost,
  options: WatchEventsOptions = {},
): AsyncGenerator<NvmlEvent, void, undefined> {
  const stop = options.signal ? AbortSignal.any([options.signal, host.closing]) : host.closing;
  if (stop.aborted) return;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const wanted = (options.types ?? (Object.keys(nvmlEventTypeBits) as NvmlEventType[]))
    .reduce((mask, type) => mask | nvmlEventTypeBits[type], 0);

  const setOut: Out<NvmlHandle | null> = [null];
  lib.check('nvmlEventSetCreate', lib.fn.nvmlEventSetCreate(setOut));
  const set = setOut[0];
  if (set === null) throw lib.error('nvmlEventSetCreate', NvmlReturn.ERROR_UNKNOWN);

  let inFlight: Promise<WaitResult> | undefined;
  try {
    const watched = register(lib, set, wanted, options.devices);
    while (!stop.aborted) {
      inFlight = waitOnce(lib, set, timeoutMs);
      const result = await untilAborted(inFlight, stop);
      if (result === aborted) break;
      inFlight = undefined;
      if (result.rc === NvmlReturn.ERROR_TIMEOUT) continue;
      lib.check('nvmlEventSetWait_v2', result.rc);
      yield toEvent(result.data, watched);
    }
  } finally {
    host.releaseEventSet(set, inFlight ?? Promise.resolve());
  }
}

/** Registers each GPU for the wanted types it supports; returns them by handle. */
function register(lib: NvmlLibrary, set: NvmlHandle, wanted: number, devices?: number[]): Map<NvmlHandle, Watched> {
  const countOut: Out<number> = [0];
  lib.check('nvmlDeviceGetCount_v2', lib.fn.nvmlDeviceGetCount_v2(countOut));
  const indices = devices ?? Array.from({ length: countOut[0] }, (_, i) => i);
  const watched = new Map<NvmlHandle, Watched>();
  for (const index of indices) {
    const device = getDeviceHandle(lib, index);
    // Asking for a type the GPU lacks makes nvmlDeviceRegisterEvents fail as a whole.
    const supportedOut: Out<U64> = [wanted];
    const rc = lib.fn.nvmlDeviceGetSupportedEventTypes?.(device, supportedOut) ?? NvmlReturn.SUCCESS;
    if (rc === NvmlReturn.ERROR_NOT_SUPPORTED) continue;
    lib.check('nvmlDeviceGetSupportedEventTypes', rc, index);
    const types = wanted & toNumber(supportedOut[0]);
    if (types === 0) continue;
    const registered = lib.fn.nvmlDeviceRegisterEvents(device, types, set);
    if (registered === NvmlReturn.ERROR_NOT_SUPPORTED) continue;
    lib.check('nvmlDeviceRegisterEvents', registered, index);
    watched.set(device, { index, uuid: readUuid(lib, device, index) });
  }
  return watched;
}

function waitOnce(lib: NvmlLibrary, set: NvmlHandle, timeoutMs: number): Promise<WaitResult> {
  const data: Partial<NvmlEventData> = {};
  return new Promise((resolve, reject) => {
    lib.fn.nvmlEventSetWait_v2.async(set, data, timeoutMs, (err: unknown, rc: number) => {
      if (err) reject(err instanceof Error ? err : new Error(String(err)));
      else resolve({ rc, data });
    });
  });
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | typeof aborted> {
  if (signal.aborted) return Promise.resolve(aborted);
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve(aborted);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

function toEvent(data: Partial<NvmlEventData>, watched: Map<NvmlHandle, Watched>): NvmlEvent {
  const mask = toNumber(data.eventType ?? 0);
  const type = (Object.keys(nvmlEventTypeBits) as NvmlEventType[]).find((t) => (mask & nvmlEventTypeBits[t]) !== 0);
  // NVML only delivers the types a set registered, and we register only these.
  if (type === undefined) throw new Error(`NVML delivered an event type not registered: 0x${mask.toString(16)}`);
  const gpu = data.device == null ? undefined : watched.get(data.device);
  const value = toNumber(data.eventData ?? 0);
  return {
    type,
    ...(gpu && { index: gpu.index, uuid: gpu.uuid }),
    ...(type === 'xid' && { xid: value }),
    data: value,
  };
}
