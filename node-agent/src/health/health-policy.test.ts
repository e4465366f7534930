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

const xid = (n: number): HealthObservation => ({ type: 'xid', xid: n, description: `XID ${n}` });
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

describe('observeHealth', () => {
  it.each<[string, HealthObservation[], boolean, string[]]>([
    ['a fresh GPU is healthy', [], true, []],
    ['critical XID 79 makes it unhealthy', [xid(79)], false, [U('XID')]],
    ['ignored XID 13 changes nothing', [xid(13)], true, []],
    ['every default-ignored XID changes nothing', [xid(13), xid(31), xid(43), xid(45), xid(68), xid(109)], true, []],
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

  it('honours a configured ignored set', () => {
    const strict: HealthPolicy = { ...policy, ignoredXids: new Set() };
    expect(observeHealth(INITIAL_GPU_HEALTH, xid(13), strict).changes).toHaveLength(1);
    const lenient: HealthPolicy = { ...policy, ignoredXids: new Set([79]) };
    expect(observeHealth(INITIAL_GPU_HEALTH, xid(79), lenient).changes).toEqual([]);
  });

  it('says why a GPU is unhealthy, and nothing when healthy', () => {
    expect(healthReason(INITIAL_GPU_HEALTH)).toBe('');
    const { state } = run([sample({ vol: 0, t: 95 }), sample({ vol: 3, t: 95 }), xid(79)]);
    expect(healthReason(state)).toBe('critical XID 79; 3 new uncorrectable ECC errors; too hot (95 °C)');
  });

  it('carries the XID number and its description on the change', () => {
    const { changes } = observeHealth(INITIAL_GPU_HEALTH, { type: 'xid', xid: 79, description: 'XID 79: GPU has fallen off the bus' }, policy);
    expect(changes).toEqual([{ kind: 'XID', healthy: false, xid: 79, message: 'XID 79: GPU has fallen off the bus' }]);
  });
});
