// Writes the state file the fake libnvidia-ml.so.1 reads (FAKE_NVML_STATE): the
// GPUs it reports, which fields fail, and the queue of pending events. Used by
// tests and by the agent's simulation mode. The file is replaced by rename, so
// the library (which re-reads it when its inode or mtime changes) never sees a
// half-written one. The format is described in the package README.
import { renameSync, rmSync, writeFileSync } from 'node:fs';

/** Names the fake accepts in `unsupported` and `errors` (one per NVML call or group of calls). */
export type FakeNvmlField =
  | 'name'
  | 'uuid'
  | 'pci_bus_id'
  | 'memory'
  | 'utilization'
  | 'temperature'
  | 'power_usage'
  | 'power_limit'
  | 'clock_sm'
  | 'clock_mem'
  | 'ecc'
  | 'retired_pages'
  | 'remapped_rows'
  | 'throttle_reasons'
  | 'events'
  | 'recovery_action';

/** One fake GPU; anything left out keeps the fake's H100 default. */
export interface FakeGpu {
  name?: string;
  uuid?: string;
  pciBusId?: string;
  memoryTotalBytes?: number;
  memoryUsedBytes?: number;
  utilizationGpuPercent?: number;
  utilizationMemoryPercent?: number;
  temperatureC?: number;
  powerUsageWatts?: number;
  powerLimitWatts?: number;
  smClockMhz?: number;
  memoryClockMhz?: number;
  eccCorrectedVolatile?: number;
  eccUncorrectedVolatile?: number;
  eccCorrectedAggregate?: number;
  eccUncorrectedAggregate?: number;
  retiredPagesMultipleSingleBitEcc?: number;
  retiredPagesDoubleBitEcc?: number;
  remappedRowsCorrected?: number;
  remappedRowsUncorrected?: number;
  remappedRowsPending?: boolean;
  remappedRowsFailed?: boolean;
  /** nvmlClocksEventReason* bitmask. */
  throttleReasons?: number;
  /** NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset. */
  recoveryAction?: number;
  /** Calls that answer NVML_ERROR_NOT_SUPPORTED. */
  unsupported?: FakeNvmlField[];
  /** Calls that answer this NVML return code, e.g. { temperature: 15 } for "GPU is lost". */
  errors?: Partial<Record<FakeNvmlField, number>>;
}

export interface FakeNvmlState {
  /** 0 to 8 GPUs. */
  gpus: FakeGpu[];
  driverVersion?: string;
  /** As NVML encodes it: 12040 for 12.4. */
  cudaVersion?: number;
  /** Makes nvmlInit_v2 fail with this return code, e.g. 9 (driver not loaded). */
  initError?: number;
}

export interface FakeNvmlEvent {
  gpu: number;
  type: 'xid' | 'ecc_single' | 'ecc_double';
  /** eventData: the XID number for 'xid'. */
  data?: number;
}

const MAX_GPUS = 8;
/** The file keeps this many most recent events; the C side holds up to 256. */
const MAX_EVENTS = 128;

type ValueKey = Exclude<keyof FakeGpu, 'unsupported' | 'errors'>;
const number = (v: unknown) => String(Math.round(Number(v)));
const milliwatts = (v: unknown) => String(Math.round(Number(v) * 1000));
const flag = (v: unknown) => (v ? '1' : '0');
const text = (v: unknown) => String(v);

/** FakeGpu field -> state-file key and how its value is written. */
const gpuKeys: Record<ValueKey, [key: string, format: (v: unknown) => string]> = {
  name: ['name', text],
  uuid: ['uuid', text],
  pciBusId: ['pci_bus_id', text],
  memoryTotalBytes: ['memory_total', number],
  memoryUsedBytes: ['memory_used', number],
  utilizationGpuPercent: ['utilization_gpu', number],
  utilizationMemoryPercent: ['utilization_memory', number],
  temperatureC: ['temperature', number],
  powerUsageWatts: ['power_usage', milliwatts],
  powerLimitWatts: ['power_limit', milliwatts],
  smClockMhz: ['clock_sm', number],
  memoryClockMhz: ['clock_mem', number],
  eccCorrectedVolatile: ['ecc_corrected_volatile', number],
  eccUncorrectedVolatile: ['ecc_uncorrected_volatile', number],
  eccCorrectedAggregate: ['ecc_corrected_aggregate', number],
  eccUncorrectedAggregate: ['ecc_uncorrected_aggregate', number],
  retiredPagesMultipleSingleBitEcc: ['retired_pages_sbe', number],
  retiredPagesDoubleBitEcc: ['retired_pages_dbe', number],
  remappedRowsCorrected: ['remapped_corrected', number],
  remappedRowsUncorrected: ['remapped_uncorrected', number],
  remappedRowsPending: ['remapped_pending', flag],
  remappedRowsFailed: ['remapped_failure', flag],
  throttleReasons: ['throttle_reasons', (v) => `0x${Number(v).toString(16)}`],
  recoveryAction: ['recovery_action', number],
};

/** The state file's text for `state` and the events still queued (each with its sequence number). */
export function formatFakeNvmlState(state: FakeNvmlState, events: ReadonlyArray<FakeNvmlEvent & { seq: number }> = []): string {
  if (state.gpus.length > MAX_GPUS) throw new RangeError(`the fake NVML has at most ${MAX_GPUS} GPUs`);
  const lines = ['# fake NVML state (node-nvml-bindings); written by FakeNvmlStateFile', `gpus=${state.gpus.length}`];
  if (state.driverVersion !== undefined) lines.push(`driver_version=${oneLine(state.driverVersion)}`);
  if (state.cudaVersion !== undefined) lines.push(`cuda_version=${number(state.cudaVersion)}`);
  if (state.initError !== undefined) lines.push(`init_error=${number(state.initError)}`);
  state.gpus.forEach((gpu, index) => {
    for (const [field, [key, format]] of Object.entries(gpuKeys) as [ValueKey, (typeof gpuKeys)[ValueKey]][]) {
      const value = gpu[field];
      if (value !== undefined) lines.push(`gpu.${index}.${key}=${oneLine(format(value))}`);
    }
    if (gpu.unsupported?.length) lines.push(`gpu.${index}.unsupported=${gpu.unsupported.join(',')}`);
    for (const [field, code] of Object.entries(gpu.errors ?? {})) {
      lines.push(`gpu.${index}.error.${field}=${number(code)}`);
    }
  });
  for (const e of events) {
    if (!Number.isInteger(e.gpu) || e.gpu < 0 || e.gpu >= MAX_GPUS) throw new RangeError(`event GPU ${e.gpu} is out of range`);
    lines.push(`event=${e.seq} ${e.gpu} ${e.type} ${number(e.data ?? 0)}`);
  }
  return `${lines.join('\n')}\n`;
}

function oneLine(value: string): string {
  if (/[\r\n]/.test(value)) throw new RangeError(`a fake NVML value cannot span lines: ${JSON.stringify(value)}`);
  return value;
}

/**
 * A state file owned by one writer. Creating it starts a fresh event history:
 * it removes the "<path>.consumed" file in which the fake records what it has
 * delivered, so sequence numbers restart at 1.
 */
export class FakeNvmlStateFile {
  private state: FakeNvmlState;
  private events: (FakeNvmlEvent & { seq: number })[] = [];
  private lastSeq = 0;

  constructor(
    readonly path: string,
    state: FakeNvmlState = { gpus: [] },
  ) {
    this.state = state;
    rmSync(`${path}.consumed`, { force: true });
    this.write();
  }

  /** The environment the fake library reads. */
  env(): { FAKE_NVML_STATE: string } {
    return { FAKE_NVML_STATE: this.path };
  }

  get current(): FakeNvmlState {
    return this.state;
  }

  /** Replaces the GPUs and system values; queued events stay. */
  set(state: FakeNvmlState): void {
    this.state = state;
    this.write();
  }

  /** Merges `changes` into one GPU. */
  updateGpu(index: number, changes: FakeGpu): void {
    const gpu = this.state.gpus[index];
    if (!gpu) throw new RangeError(`no fake GPU ${index}`);
    const gpus = [...this.state.gpus];
    gpus[index] = { ...gpu, ...changes };
    this.set({ ...this.state, gpus });
  }

  /** Queues an event for nvmlEventSetWait_v2; returns its sequence number. */
  injectEvent(event: FakeNvmlEvent): number {
    const seq = ++this.lastSeq;
    this.events = [...this.events, { ...event, seq }].slice(-MAX_EVENTS);
    this.write();
    return seq;
  }

  /** Queues an XID critical error, e.g. injectXid(0, 79) for "GPU has fallen off the bus". */
  injectXid(gpu: number, xid: number): number {
    return this.injectEvent({ gpu, type: 'xid', data: xid });
  }

  private write(): void {
    const text = formatFakeNvmlState(this.state, this.events);
    const temporary = `${this.path}.${process.pid}.tmp`;
    writeFileSync(temporary, text);
    renameSync(temporary, this.path);
  }
}
