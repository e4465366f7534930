import { describe, expect, it } from 'vitest';
import {
  healthReason,
  INITIAL_GPU_HEALTH,
  isHealthy,
  observeHealth,
  type GpuHealthState,
  type HealthChangeKind,
  type HealthObservation,
  type HealthPolicy,
} from './health-policy.js';

const policy: HealthPolicy = { ignoredXids: new Set([13, 31, 43, 45, 68, 109]), maxTemperatureC: 90, temperatureHysteresisC: 5 };

const xid = (n: number, message?: string): HealthObservation => ({ type: 'xid', xid: n, message });
const sample = (s: { t?: number; vol?: number; agg?: number }): HealthObservation => ({
  type: 'sample',
  temperatureC: s.t,
  eccUncorrectedVolatile: s.vol,
  eccUncorrectedAggregate: s.agg,
});

/** Runs observations from a fresh GPU; returns the final state and the kinds of every change. */
function run(observations: HealthObservation[]): { state: GpuHealthState; kinds: string[] } {
  let state = INITIAL_GPU_HEALTH;
  const kinds: string[] = [];
  for (const observation of observations) {
    const result = observeHealth(state, observation, policy);
    state = result.state;
    kinds.push(...result.changes.map((c) => `${c.kind}:${c.healthy ? 'healthy' : 'unhealthy'}`));
  }
  return { state, kinds };
}

const U = (kind: HealthChangeKind) => `${kind}:unhealthy`;
const RECOVERED = 'RECOVERED:healthy';
/** An application-level XID: on the timeline, health unchanged. */
const APP = (healthy: boolean) => `XID:${healthy ? 'healthy' : 'unhealthy'}`;

describe('observeHealth', () => {
  it.each<[string, HealthObservation[], boolean, string[]]>([
    ['a fresh GPU is healthy', [], true, []],
    ['critical XID 79 makes it unhealthy', [xid(79)], false, [U('XID')]],
    ['application-level XID 13 changes nothing but the timeline', [xid(13)], true, [APP(true)]],
    ['every application-level XID keeps the GPU healthy', [xid(13), xid(31), xid(43), xid(45), xid(68), xid(94), xid(109)], true, Array(7).fill(APP(true))],
    ['XID 13 in a loop is on the timeline once', [xid(13), xid(13), xid(13)], true, [APP(true)]],
    ['alternating application XIDs are each on the timeline once', [xid(13), xid(31), xid(13), xid(31)], true, [APP(true), APP(true)]],
    ['XID 13 on an unhealthy GPU keeps it unhealthy', [xid(79), xid(13)], false, [U('XID'), APP(false)]],
    ['after a recovery, XID 13 is news again', [xid(13), xid(79), { type: 'operator_reset' }, xid(13)], true, [APP(true), U('XID'), RECOVERED, APP(true)]],
    ['reset class XID 48 makes it unhealthy', [xid(48)], false, [U('XID')]],
    ['reset class XID 95 makes it unhealthy', [xid(95)], false, [U('XID')]],
    ['an XID the catalog does not know makes it unhealthy', [xid(250)], false, [U('XID')]],
    ['XID 154 reporting no recovery action keeps it healthy', [xid(154, 'GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)')], true, [APP(true)]],
    ['XID 154 reporting a node reboot makes it unhealthy', [xid(154, 'GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)')], false, [U('XID')]],
    ['the same XID again is not a new change', [xid(79), xid(79)], false, [U('XID')]],
    ['a different critical XID is a new change', [xid(79), xid(48)], false, [U('XID'), U('XID')]],
    ['an XID stays after ordinary samples', [xid(79), sample({ t: 40, vol: 0 }), sample({ t: 40, vol: 0 })], false, [U('XID')]],
    ['first sample sets the ECC baseline, old errors are not new', [sample({ vol: 5 })], true, []],
    ['uncorrectable ECC count growing is unhealthy', [sample({ vol: 0 }), sample({ vol: 2 })], false, [U('ECC_UNCORRECTABLE')]],
    ['ECC stays unhealthy while the count holds', [sample({ vol: 0 }), sample({ vol: 2 }), sample({ vol: 2 })], false, [U('ECC_UNCORRECTABLE')]],
    ['aggregate count is used when volatile is unsupported', [sample({ agg: 1 }), sample({ agg: 3 })], false, [U('ECC_UNCORRECTABLE')]],
    ['no ECC counters at all: no ECC verdict', [sample({ t: 30 }), sample({ t: 30 })], true, []],
    ['a double-bit ECC event is unhealthy at once', [{ type: 'ecc_uncorrectable_event' }], false, [U('ECC_UNCORRECTABLE')]],
    ['volatile ECC counters zeroed = GPU reset: recovers from ECC', [sample({ vol: 0 }), sample({ vol: 2 }), sample({ vol: 0 })], true, [U('ECC_UNCORRECTABLE'), RECOVERED]],
    ['GPU reset also clears an XID', [sample({ vol: 1 }), xid(79), sample({ vol: 0 })], true, [U('XID'), RECOVERED]],
    ['unreadable then readable again = reset: clears an XID', [xid(79), { type: 'unreadable' }, sample({ t: 40 })], true, [U('XID'), RECOVERED]],
    ['unreadable alone is not a health change', [{ type: 'unreadable' }], true, []],
    ['operator reset clears an XID', [xid(79), { type: 'operator_reset' }], true, [U('XID'), RECOVERED]],
    ['operator reset clears ECC and thermal', [sample({ vol: 0, t: 95 }), sample({ vol: 1, t: 95 }), { type: 'operator_reset' }], true, [U('THERMAL'), U('ECC_UNCORRECTABLE'), RECOVERED]],
    ['operator reset of a healthy GPU changes nothing', [{ type: 'operator_reset' }], true, []],
    ['a GPU reset clears a reset-class XID', [xid(48), { type: 'gpu_reset' }], true, [U('XID'), RECOVERED]],
    ['a GPU reset clears ECC; counters restarting from 0 are no new error', [sample({ vol: 0 }), sample({ vol: 2 }), { type: 'gpu_reset' }, sample({ vol: 0 })], true, [U('ECC_UNCORRECTABLE'), RECOVERED]],
    ['a GPU reset does not cool a hot GPU', [sample({ t: 95 }), xid(95), { type: 'gpu_reset' }], false, [U('THERMAL'), U('XID')]],
    ['errors after a reset count again', [xid(95), { type: 'gpu_reset' }, sample({ vol: 0 }), sample({ vol: 1 })], false, [U('XID'), RECOVERED, U('ECC_UNCORRECTABLE')]],
    ['at the temperature limit is unhealthy', [sample({ t: 90 })], false, [U('THERMAL')]],
    ['just under the limit is healthy', [sample({ t: 89 })], true, []],
    ['hysteresis: still hot at 86 °C', [sample({ t: 92 }), sample({ t: 86 })], false, [U('THERMAL')]],
    ['cooled to max - hysteresis recovers', [sample({ t: 92 }), sample({ t: 85 })], true, [U('THERMAL'), RECOVERED]],
    ['unsupported temperature leaves thermal alone', [sample({ t: 92 }), sample({})], false, [U('THERMAL')]],
    ['cooling down does not clear an XID', [xid(79), sample({ t: 92 }), sample({ t: 40 })], false, [U('XID'), U('THERMAL')]],
    ['XID on a hot GPU is its own change', [sample({ t: 95 }), xid(79)], false, [U('THERMAL'), U('XID')]],
  ])('%s', (_name, observations, healthy, kinds) => {
    const result = run(observations);
    expect(isHealthy(result.state)).toBe(healthy);
    expect(result.kinds).toEqual(kinds);
  });

  it("classifies XID 154 by the driver's recovery action, and says so on the change", () => {
    const reboot = observeHealth(INITIAL_GPU_HEALTH, { type: 'xid', xid: 154, driverRecoveryAction: 2 }, policy);
    expect(reboot.changes).toEqual([expect.objectContaining({ kind: 'XID', healthy: false, xid: 154, recommendedAction: 'RESTART_BM', driverAction: 'NODE_REBOOT' })]);
    const none = observeHealth(INITIAL_GPU_HEALTH, { type: 'xid', xid: 154, driverRecoveryAction: 0 }, policy);
    expect(none.changes).toEqual([expect.objectContaining({ healthy: true, recommendedAction: 'IGNORE', driverAction: 'NONE' })]);
    expect(observeHealth(INITIAL_GPU_HEALTH, xid(95), policy).changes[0]).toMatchObject({ recommendedAction: 'RESET_GPU' });
  });

  it('honours a configured ignored set', () => {
    // The catalog decides first: an empty ignored set does not make XID 13 critical.
    const strict: HealthPolicy = { ...policy, ignoredXids: new Set() };
    expect(isHealthy(observeHealth(INITIAL_GPU_HEALTH, xid(13), strict).state)).toBe(true);
    const lenient: HealthPolicy = { ...policy, ignoredXids: new Set([79]) };
    const ignored = observeHealth(INITIAL_GPU_HEALTH, xid(79), lenient);
    expect(isHealthy(ignored.state)).toBe(true);
    expect(ignored.changes.map((c) => c.healthy)).toEqual([true]);
  });

  it('says why a GPU is unhealthy, and nothing when healthy', () => {
    expect(healthReason(INITIAL_GPU_HEALTH)).toBe('');
    const { state } = run([sample({ vol: 0, t: 95 }), sample({ vol: 3, t: 95 }), xid(79)]);
    expect(healthReason(state)).toBe('critical XID 79; 3 new uncorrectable ECC errors; too hot (95 °C)');
  });

  it("carries the XID number, NVIDIA's meaning and the recommended action on the change", () => {
    const { changes } = observeHealth(INITIAL_GPU_HEALTH, xid(79), policy);
    expect(changes).toEqual([
      { kind: 'XID', healthy: false, xid: 79, recommendedAction: 'RESTART_BM', message: 'XID 79: GPU has fallen off the bus; recommended action: reboot the node (RESTART_BM)' },
    ]);
    const app = observeHealth(INITIAL_GPU_HEALTH, xid(13), policy).changes[0];
    expect(app?.message).toBe('XID 13: graphics engine exception; recommended action: restart the application (the GPU is fine) (RESTART_APP)');
  });
});
