// The GPU health policy, as a pure function: (state, observation) -> (state, changes).
// A GPU is unhealthy while any condition holds:
//   - xid:     a critical XID was reported: NVIDIA's XID catalog (shared/src/xid-catalog.ts)
//              recommends resetting the GPU, rebooting the node, checking the hardware or
//              contacting support, and the XID is not in the ignored set;  sticky until reset
//   - ecc:     the uncorrectable ECC count grew since the previous sample
//              (or NVML pushed a double-bit ECC event);                   sticky until reset
//   - thermal: temperature >= max; clears at max - hysteresis or below.
// Sticky conditions clear on a GPU reset, seen as NVML's volatile uncorrectable ECC count
// going down (a reset or driver reload zeroes it) or the GPU reading again after it could
// not be read (fallen off the bus, then reset), and on an operator's ResetGpuHealth.
// Unlike NVIDIA's device plugin, a GPU recovers. Every change of health, and every new
// condition on an already unhealthy GPU, is a HealthChange the agent pushes at once.
// Application-level XIDs (catalog IGNORE / RESTART_APP, or in the ignored set) change
// nothing but the timeline: a HealthChange that keeps the GPU's health. Each such XID is
// reported once per GPU until the GPU's health next changes, because a tenant's program
// can raise XID 13/31/43 in a loop and must not flood the control plane's timeline.
import { actionMakesGpuUnhealthy, classifyXid, describeXidClass, type XidAction } from '@svc/shared';

export interface HealthPolicy {
  ignoredXids: ReadonlySet<number>;
  maxTemperatureC: number;
  temperatureHysteresisC: number;
}

export type HealthChangeKind = 'XID' | 'ECC_UNCORRECTABLE' | 'THERMAL' | 'RECOVERED';

export interface HealthChange {
  kind: HealthChangeKind;
  /** Health after this change. */
  healthy: boolean;
  /** The XID, for kind XID. */
  xid?: number;
  /** For kind XID: the bucket it was classified into, and XID 154's driver-reported action. */
  recommendedAction?: XidAction;
  driverAction?: string;
  message: string;
}

export interface GpuHealthState {
  /** The critical XID that made the GPU unhealthy; undefined when none holds. */
  xid: number | undefined;
  /** Why the ECC condition holds; undefined when it does not. */
  ecc: string | undefined;
  /** The temperature that made the GPU unhealthy; undefined when not too hot. */
  thermalC: number | undefined;
  /** Uncorrectable ECC counts at the previous sample: the baseline for "new" errors. */
  lastEccVolatile: number | undefined;
  lastEccAggregate: number | undefined;
  /** The last read failed; the next successful read counts as a GPU reset. */
  unreadable: boolean;
  /** Application-level XIDs already on the timeline since the last health change. */
  reportedAppXids: readonly number[];
}

export const INITIAL_GPU_HEALTH: GpuHealthState = {
  xid: undefined,
  ecc: undefined,
  thermalC: undefined,
  lastEccVolatile: undefined,
  lastEccAggregate: undefined,
  unreadable: false,
  reportedAppXids: [],
};

export type HealthObservation =
  /** From the NVML event watch; `message` is the driver's text where there is one (XID 154 carries its recovery action). */
  | { type: 'xid'; xid: number; message?: string; driverRecoveryAction?: number }
  /** NVML's double-bit (uncorrectable) ECC event. */
  | { type: 'ecc_uncorrectable_event' }
  /** A telemetry sample; absent values are unsupported and leave their condition alone. */
  | { type: 'sample'; temperatureC?: number; eccUncorrectedVolatile?: number; eccUncorrectedAggregate?: number }
  /** The GPU could not be read (handle, UUID or name failed). */
  | { type: 'unreadable' }
  /** ResetGpuHealth from the control plane. */
  | { type: 'operator_reset' }
  /** The GPU was reset (ResetGpu, nvidia-smi --gpu-reset): sticky faults clear, ECC counters restart. */
  | { type: 'gpu_reset' };

export interface HealthResult {
  state: GpuHealthState;
  changes: HealthChange[];
}

export function isHealthy(state: GpuHealthState): boolean {
  return state.xid === undefined && state.ecc === undefined && state.thermalC === undefined;
}

/** Why the GPU is unhealthy, for telemetry; empty when healthy. */
export function healthReason(state: GpuHealthState): string {
  const reasons: string[] = [];
  if (state.xid !== undefined) reasons.push(`critical XID ${state.xid}`);
  if (state.ecc !== undefined) reasons.push(state.ecc);
  if (state.thermalC !== undefined) reasons.push(`too hot (${state.thermalC} °C)`);
  return reasons.join('; ');
}

export function observeHealth(state: GpuHealthState, observation: HealthObservation, policy: HealthPolicy): HealthResult {
  const wasHealthy = isHealthy(state);
  const changes: HealthChange[] = [];
  let next = state;
  let recoveredBy: string | undefined;
  /** The only change is an application-level XID on the timeline. */
  let timelineOnly = false;

  switch (observation.type) {
    case 'xid': {
      const xidClass = classifyXid(observation.xid, observation.message, observation.driverRecoveryAction);
      const message = describeXidClass(xidClass);
      const classified = { recommendedAction: xidClass.action, ...(xidClass.driverAction ? { driverAction: xidClass.driverAction } : {}) };
      const critical = actionMakesGpuUnhealthy(xidClass.action) && !policy.ignoredXids.has(observation.xid);
      if (critical) {
        if (state.xid === observation.xid) break;
        next = { ...state, xid: observation.xid };
        changes.push({ kind: 'XID', healthy: false, xid: observation.xid, ...classified, message });
      } else {
        if (state.reportedAppXids.includes(observation.xid)) break;
        next = { ...state, reportedAppXids: [...state.reportedAppXids, observation.xid] };
        changes.push({ kind: 'XID', healthy: wasHealthy, xid: observation.xid, ...classified, message });
        timelineOnly = true;
      }
      break;
    }
    case 'ecc_uncorrectable_event': {
      if (state.ecc !== undefined) break;
      const ecc = 'uncorrectable (double-bit) ECC error event';
      next = { ...state, ecc };
      changes.push({ kind: 'ECC_UNCORRECTABLE', healthy: false, message: ecc });
      break;
    }
    case 'unreadable':
      next = { ...state, unreadable: true };
      break;
    case 'operator_reset':
      next = { ...state, xid: undefined, ecc: undefined, thermalC: undefined };
      recoveredBy = 'health reset by an operator';
      break;
    case 'gpu_reset':
      // Heat is not cured by a reset: the next sample decides the thermal condition.
      next = { ...state, xid: undefined, ecc: undefined, lastEccVolatile: undefined, unreadable: false };
      recoveredBy = 'GPU reset (nvidia-smi --gpu-reset)';
      break;
    case 'sample': {
      const sampled = applySample(state, observation, policy);
      next = sampled.state;
      changes.push(...sampled.changes);
      recoveredBy = sampled.recoveredBy;
      break;
    }
  }

  // Changes raised above are new conditions (healthy=false); a GPU that ends the step
  // healthy after being unhealthy has recovered.
  if (!wasHealthy && isHealthy(next)) {
    changes.push({ kind: 'RECOVERED', healthy: true, message: recoveredBy ?? 'condition cleared' });
  }
  // A health change starts a new incident: its application-level XIDs are news again.
  if (changes.length > 0 && !timelineOnly) {
    next = { ...next, reportedAppXids: [] };
  }
  return { state: next, changes };
}

function applySample(
  state: GpuHealthState,
  sample: Extract<HealthObservation, { type: 'sample' }>,
  policy: HealthPolicy,
): HealthResult & { recoveredBy: string | undefined } {
  const changes: HealthChange[] = [];
  let next: GpuHealthState = { ...state, unreadable: false };
  let recoveredBy: string | undefined;

  const volatile = sample.eccUncorrectedVolatile;
  const aggregate = sample.eccUncorrectedAggregate;
  const countersZeroed = volatile !== undefined && state.lastEccVolatile !== undefined && volatile < state.lastEccVolatile;
  const resetSeen = state.unreadable || countersZeroed;
  if (resetSeen && (next.xid !== undefined || next.ecc !== undefined)) {
    next = { ...next, xid: undefined, ecc: undefined };
    recoveredBy = state.unreadable ? 'GPU readable again after a reset' : 'GPU reset (volatile ECC counters cleared)';
  }

  // New uncorrectable errors: prefer the volatile counter (since the last reset), fall back
  // to the lifetime one when the GPU reports only that.
  const grew =
    volatile !== undefined && state.lastEccVolatile !== undefined
      ? volatile - state.lastEccVolatile
      : aggregate !== undefined && state.lastEccAggregate !== undefined
        ? aggregate - state.lastEccAggregate
        : 0;
  if (grew > 0 && next.ecc === undefined) {
    const ecc = `${grew} new uncorrectable ECC error${grew === 1 ? '' : 's'}`;
    next = { ...next, ecc };
    changes.push({ kind: 'ECC_UNCORRECTABLE', healthy: false, message: ecc });
  }
  next = {
    ...next,
    lastEccVolatile: volatile ?? next.lastEccVolatile,
    lastEccAggregate: aggregate ?? next.lastEccAggregate,
  };

  const t = sample.temperatureC;
  if (t !== undefined) {
    if (next.thermalC === undefined && t >= policy.maxTemperatureC) {
      next = { ...next, thermalC: t };
      changes.push({ kind: 'THERMAL', healthy: false, message: `${t} °C, at or above the ${policy.maxTemperatureC} °C limit` });
    } else if (next.thermalC !== undefined && t <= policy.maxTemperatureC - policy.temperatureHysteresisC) {
      next = { ...next, thermalC: undefined };
      recoveredBy ??= `cooled down to ${t} °C`;
    }
  }
  return { state: next, changes, recoveredBy };
}
