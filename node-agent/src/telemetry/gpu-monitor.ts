// Owns the GPUs' side of the agent: reads every GPU through NVML when asked (each report
// interval), runs the XID/ECC event watch continuously, keeps each GPU's health state and
// applies the health policy to every sample, event and operator reset. Health changes go
// to `onHealthEvent` the moment they are known, not on the next report.
import type { AgentMessage, GpuSample, HealthEvent } from '@svc/proto';
import type { Clock, Logger } from '@svc/shared';
import { NvmlError, type Nvml, type NvmlEvent } from 'node-nvml-bindings';
import type { GpuHealthFile, StickyHealthByUuid } from '../health/health-file.js';
import type { GpuResetter } from '../health/gpu-reset.js';
import {
  healthReason,
  isHealthy,
  INITIAL_GPU_HEALTH,
  observeHealth,
  type GpuHealthState,
  type HealthChange,
  type HealthObservation,
  type HealthPolicy,
} from '../health/health-policy.js';
import { toGpuSample, unreadableGpuSample } from './gpu-sample.js';

/** The telemetry message of one report (AgentMessage.telemetry). */
export interface GpuTelemetry extends NonNullable<AgentMessage['telemetry']> {
  sampled_at_ms: number;
  gpus: GpuSample[];
}

/** How long one native event wait blocks; also how late an aborted watch frees its set. */
const WATCH_TIMEOUT_MS = 500;
/** Pause before restarting an event watch that failed, so a broken driver does not spin. */
const WATCH_RESTART_MS = 5_000;

interface TrackedGpu {
  index: number;
  uuid: string;
  name: string;
  health: GpuHealthState;
}

export interface GpuMonitorOptions {
  nvml: Nvml;
  policy: HealthPolicy;
  clock: Clock;
  log: Logger;
  onHealthEvent: (event: HealthEvent) => void;
  /** Keeps sticky health (XID, ECC) across agent restarts; none in tests that do not care. */
  healthFile?: GpuHealthFile;
  /** Resets a GPU (ResetGpu); absent: resets are refused. */
  resetGpu?: GpuResetter;
}

/** The answer to a ResetGpu command. */
export interface GpuResetOutcome {
  ok: boolean;
  errorCode: string;
  errorMessage: string;
  healthy: boolean;
  healthReason: string;
  output: string;
}

export class GpuMonitor {
  private readonly gpus = new Map<string, TrackedGpu>();
  /** Sticky health from before a restart, applied when each GPU is first seen. */
  private readonly kept: StickyHealthByUuid;

  constructor(private readonly options: GpuMonitorOptions) {
    this.kept = options.healthFile?.load() ?? {};
  }

  /** Reads every GPU, applies the policy to the readings, and returns the telemetry message. */
  sample(): GpuTelemetry {
    let readings;
    try {
      readings = this.options.nvml.readDevices();
    } catch (err) {
      // NVML cannot even count the GPUs (driver gone): every GPU we know is unreadable,
      // reported as such rather than as a shorter list.
      if (!(err instanceof NvmlError)) throw err;
      this.options.log.error({ err: err.message }, 'NVML cannot list the GPUs');
      readings = { gpus: [], failed: [...this.gpus.values()].map((g) => ({ index: g.index, error: err })) };
    }
    const { gpus, failed } = readings;
    const samples: GpuSample[] = [];
    for (const reading of gpus) {
      for (const fieldError of reading.errors) {
        this.options.log.warn({ gpu: reading.index, field: fieldError.field, err: fieldError.error.message }, 'NVML could not read a GPU field');
      }
      const gpu = this.track(reading.index, reading.uuid, reading.name);
      this.observe(gpu, {
        type: 'sample',
        temperatureC: reading.temperatureC,
        eccUncorrectedVolatile: reading.eccUncorrectedVolatile,
        eccUncorrectedAggregate: reading.eccUncorrectedAggregate,
      });
      samples.push(toGpuSample(reading, gpu.health));
    }
    for (const failure of failed) {
      this.options.log.error({ gpu: failure.index, err: failure.error.message }, 'NVML cannot read a GPU');
      const gpu = [...this.gpus.values()].find((g) => g.index === failure.index);
      // A GPU never identified has no UUID to report under; the log line above is all we have.
      if (!gpu) continue;
      this.observe(gpu, { type: 'unreadable' });
      samples.push(unreadableGpuSample(gpu, failure.error.message));
    }
    return { sampled_at_ms: this.options.clock.now(), gpus: samples };
  }

  /**
   * Clears the health of one GPU (by UUID) or, with an empty UUID, of every GPU.
   * Returns false when no GPU has that UUID.
   */
  resetHealth(uuid: string): boolean {
    const targets = uuid ? [this.gpus.get(uuid)].filter((g) => g !== undefined) : [...this.gpus.values()];
    if (uuid && targets.length === 0) return false;
    for (const gpu of targets) this.observe(gpu, { type: 'operator_reset' });
    return true;
  }

  /**
   * Resets the GPU, clears its sticky faults and reads it again: ok when the reset ran and
   * the GPU reads healthy. Every health change on the way is pushed as usual, so the
   * timeline shows the recovery (or the fault that remains) before the command's answer.
   */
  async resetGpu(uuid: string): Promise<GpuResetOutcome> {
    const gpu = this.gpus.get(uuid);
    const outcome = (ok: boolean, errorCode = '', errorMessage = '', output = ''): GpuResetOutcome => ({
      ok,
      errorCode,
      errorMessage,
      healthy: gpu ? isHealthy(gpu.health) && !gpu.health.unreadable : false,
      healthReason: gpu ? healthReason(gpu.health) : '',
      output,
    });
    if (!gpu) return outcome(false, 'not_found', `this node has no GPU ${uuid}`);
    if (!this.options.resetGpu) return outcome(false, 'unsupported', 'this agent has no GPU reset tool');
    this.options.log.warn({ gpu: gpu.index, uuid }, 'resetting the GPU');
    const run = await this.options.resetGpu(uuid);
    if (!run.ok) return outcome(false, 'reset_failed', `the GPU reset failed: ${run.output}`, run.output);
    this.observe(gpu, { type: 'gpu_reset' });
    let reading;
    try {
      reading = this.options.nvml.readDevice(gpu.index);
    } catch (err) {
      if (!(err instanceof NvmlError)) throw err;
      this.observe(gpu, { type: 'unreadable' });
      return { ...outcome(false, 'unreadable', `the GPU cannot be read after the reset: ${err.message}`, run.output), healthy: false };
    }
    this.observe(gpu, {
      type: 'sample',
      temperatureC: reading.temperatureC,
      eccUncorrectedVolatile: reading.eccUncorrectedVolatile,
      eccUncorrectedAggregate: reading.eccUncorrectedAggregate,
    });
    const result = outcome(true, '', '', run.output);
    return result.healthy ? result : { ...result, ok: false, errorCode: 'still_unhealthy', errorMessage: `the GPU still reads unhealthy after the reset: ${result.healthReason}` };
  }

  /** The XID/ECC watch, until `signal` aborts. A failed watch is logged and restarted. */
  async watch(signal: AbortSignal): Promise<void> {
    const { nvml, log } = this.options;
    if (!nvml.available) return;
    while (!signal.aborted) {
      try {
        for await (const event of nvml.watchEvents({ timeoutMs: WATCH_TIMEOUT_MS, signal })) {
          this.onNvmlEvent(event);
        }
        return;
      } catch (err) {
        log.error({ err }, `the NVML event watch failed; restarting in ${WATCH_RESTART_MS} ms`);
        await sleep(WATCH_RESTART_MS, signal);
      }
    }
  }

  private onNvmlEvent(event: NvmlEvent): void {
    if (event.uuid === undefined || event.index === undefined) {
      this.options.log.warn({ event }, 'NVML event for a GPU the watch did not register');
      return;
    }
    this.options.log.info({ event }, 'NVML event');
    const gpu = this.track(event.index, event.uuid, this.gpus.get(event.uuid)?.name ?? '');
    if (event.type === 'xid' && event.xid !== undefined) {
      // XID 154 announces that the driver's recovery action changed: read the new one.
      const driverRecoveryAction = event.xid === 154 ? this.recoveryAction(event.index) : undefined;
      this.observe(gpu, { type: 'xid', xid: event.xid, ...(driverRecoveryAction === undefined ? {} : { driverRecoveryAction }) });
    } else if (event.type === 'ecc_double') {
      this.observe(gpu, { type: 'ecc_uncorrectable_event' });
    }
    // Single-bit ECC errors were corrected: counted in telemetry, not a health matter.
  }

  private recoveryAction(index: number): number | undefined {
    try {
      return this.options.nvml.gpuRecoveryAction(index);
    } catch (err) {
      if (!(err instanceof NvmlError)) throw err;
      this.options.log.warn({ gpu: index, err: err.message }, "NVML cannot read the GPU's recovery action");
      return undefined;
    }
  }

  private track(index: number, uuid: string, name: string): TrackedGpu {
    let gpu = this.gpus.get(uuid);
    if (!gpu) {
      const kept = this.kept[uuid];
      gpu = { index, uuid, name, health: { ...INITIAL_GPU_HEALTH, xid: kept?.xid, ecc: kept?.ecc } };
      this.gpus.set(uuid, gpu);
      if (kept?.xid !== undefined || kept?.ecc !== undefined) {
        this.options.log.warn({ gpu: index, uuid, reason: healthReason(gpu.health) }, 'GPU still unhealthy from before the agent restarted');
      }
    }
    gpu.index = index;
    if (name) gpu.name = name;
    return gpu;
  }

  private observe(gpu: TrackedGpu, observation: HealthObservation): void {
    const before = gpu.health;
    const { state, changes } = observeHealth(before, observation, this.options.policy);
    gpu.health = state;
    if (state.xid !== before.xid || state.ecc !== before.ecc) this.saveStickyHealth();
    for (const change of changes) this.emit(gpu, change);
  }

  private saveStickyHealth(): void {
    const file = this.options.healthFile;
    if (!file) return;
    // GPUs not seen since the restart keep what was stored for them.
    const sticky: StickyHealthByUuid = { ...this.kept };
    for (const gpu of this.gpus.values()) {
      if (gpu.health.xid === undefined && gpu.health.ecc === undefined) delete sticky[gpu.uuid];
      else sticky[gpu.uuid] = { xid: gpu.health.xid, ecc: gpu.health.ecc };
    }
    file.save(sticky);
  }

  private emit(gpu: TrackedGpu, change: HealthChange): void {
    const event: HealthEvent = {
      gpu_uuid: gpu.uuid,
      gpu_index: gpu.index,
      kind: change.kind,
      xid: change.xid ?? 0,
      healthy: change.healthy,
      message: change.message,
      at_ms: this.options.clock.now(),
      recommended_action: change.recommendedAction ?? '',
      driver_recovery_action: change.driverAction ?? '',
    };
    this.options.log[change.healthy ? 'info' : 'warn']({ gpu: gpu.index, uuid: gpu.uuid, kind: change.kind, reason: change.message }, change.healthy ? 'GPU healthy again' : 'GPU unhealthy');
    this.options.onHealthEvent(event);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
