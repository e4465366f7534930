import { describe, expect, it } from 'vitest';
import {
  billableSeconds,
  onDemandChargeMicros,
  reservationChargeMicros,
  reservationRateMicros,
  reservationTier,
  usdToMicros,
} from './pricing.js';

describe('reservation tiers', () => {
  // $2.00 per GPU-hour list price.
  it.each([
    [1, 'none', 2_000_000],
    [23, 'none', 2_000_000],
    [24, '24h', 1_400_000],
    [48, '24h', 1_400_000], // in between: the next-lower tier
    [167, '24h', 1_400_000],
    [168, '168h', 1_190_000],
    [300, '168h', 1_190_000],
    [720, '720h', 1_190_000],
  ])('%d h -> tier %s at %d micro-USD per GPU-hour', (hours, label, rate) => {
    expect(reservationTier(hours).label).toBe(label);
    expect(reservationRateMicros(2, hours)).toBe(rate);
  });

  it('charges the whole duration up front', () => {
    // 4 GPUs for 48 h at the 24 h rate of $1.40: $268.80.
    expect(reservationChargeMicros(reservationRateMicros(2, 48), 4, 48)).toBe(usdToMicros(268.8));
    // 8 GPUs for 168 h at $1.19: $1,599.36.
    expect(reservationChargeMicros(reservationRateMicros(2, 168), 8, 168)).toBe(usdToMicros(1599.36));
  });
});

describe('on-demand', () => {
  const t0 = Date.UTC(2026, 0, 1);
  it.each([
    [null, 3_600_000, 0], // never ready: failed provisions cost nothing
    [0, 0, 60],
    [0, 59_000, 60],
    [0, 60_000, 60],
    [0, 60_001, 61], // per second, rounded up
    [0, 3_600_000, 3600],
  ])('ready at %s, ended at +%d ms -> %d s', (ready, end, seconds) => {
    expect(billableSeconds(ready === null ? null : t0 + ready, t0 + end)).toBe(seconds);
  });

  it('prices seconds at the per-GPU-hour rate', () => {
    expect(onDemandChargeMicros(2.49, 1, 3600)).toBe(2_490_000);
    expect(onDemandChargeMicros(2.49, 2, 60)).toBe(83_000);
    expect(onDemandChargeMicros(2.49, 8, 0)).toBe(0);
  });
});
