// The accrual arithmetic: running seconds, the boundaries a tick bills up to, and the
// lines that take an instance from what it was billed to a new total, which always sum to
// the price of its whole run at one charge, with the 60 s minimum on the whole run.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ManualClock } from '@svc/shared';
import { accrualBoundaries, finalSeconds, onDemandLine, onDemandPriceMicros, secondsRun, type OnDemandState } from './accrual.js';
import { onDemandChargeMicros } from './pricing.js';

const H = 3_600_000;
const state = (billedSeconds: number, over: Partial<OnDemandState> = {}): OnDemandState => ({
  orgId: 'org_1',
  instanceId: 'inst_1',
  sku: 'h100-80gb',
  gpus: 2,
  rateMicros: 2_490_000,
  billedSeconds,
  ...over,
});

describe('secondsRun and finalSeconds', () => {
  it.each([
    // readyAt, at, seconds run, billed at the end
    [0, 0, 0, 60],
    [0, 1, 1, 60],
    [0, 999, 1, 60],
    [0, 1_000, 1, 60],
    [0, 59_001, 60, 60],
    [0, 60_001, 61, 61],
    [1_500, 3_601_500, 3_600, 3_600],
    [10_000, 5_000, 0, 60], // never before ready
  ])('ready %i, at %i: %i s run, %i s billed at the end', (readyAt, at, run, end) => {
    expect(secondsRun(readyAt, at)).toBe(run);
    expect(finalSeconds(readyAt, at)).toBe(end);
  });
});

describe('accrualBoundaries', () => {
  it('bills up to the month start and the current hour, dated by an injected clock', () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 17, 13, 42, 7));
    expect(accrualBoundaries(clock.now())).toEqual([Date.UTC(2026, 10, 1), Date.UTC(2026, 10, 17, 13)]);
    clock.set(Date.UTC(2026, 11, 1, 0, 0, 30));
    expect(accrualBoundaries(clock.now())).toEqual([Date.UTC(2026, 11, 1)]);
    clock.set(Date.UTC(2027, 0, 1, 2, 0, 0));
    expect(accrualBoundaries(clock.now())).toEqual([Date.UTC(2027, 0, 1), Date.UTC(2027, 0, 1, 2)]);
  });
});

describe('onDemandLine', () => {
  const line = (accrual: boolean, createdAt = H - 1) => ({ id: 'chg_1', createdAt, accrual });

  it.each([
    // billed, total, accrual, seconds of the line (null: no line)
    [0, 3_600, true, 3_600],
    [3_600, 3_600, true, null],
    [3_600, 1_800, true, null], // an accrual never goes back
    [3_600, 3_660, false, 60],
    [0, 60, false, 60],
    [30, 60, false, 30], // 30 s accrued before a month end, ended 10 s later: the minimum is on the whole run
    [3_600, 3_000, false, -600], // the node reported a stop before the last boundary: the difference comes back
    [60, 60, false, null],
  ])('billed %i s, to %i s (accrual %s): a line of %s s', (billed, total, accrual, seconds) => {
    const got = onDemandLine(state(billed), total, line(accrual));
    if (seconds === null) return expect(got).toBeNull();
    expect(got).toMatchObject({ id: 'chg_1', orgId: 'org_1', instanceId: 'inst_1', kind: 'on_demand', createdAt: H - 1 });
    expect(got!.amountMicros).toBe(onDemandPriceMicros(2_490_000, 2, total) - onDemandPriceMicros(2_490_000, 2, billed));
    expect(got!.description).toContain(`${Math.abs(seconds)} s on demand of 2 x h100-80gb`);
    if (accrual) expect(got!.description).toContain('billed to 1970-01-01T01:00:00.000Z');
  });

  it('costs what the whole run costs at one charge, however it is cut into lines', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40_000_000 }),
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 12 }),
        fc.integer({ min: 0, max: 200_000 }),
        (rateMicros, gpus, steps, tail) => {
          let billed = 0;
          let sum = 0;
          for (const step of steps) {
            const l = onDemandLine(state(billed, { rateMicros, gpus }), billed + step, line(true));
            if (l) sum += l.amountMicros;
            billed += step;
          }
          const total = Math.max(60, billed + tail);
          const end = onDemandLine(state(billed, { rateMicros, gpus }), total, line(false));
          if (end) sum += end.amountMicros;
          expect(Number.isSafeInteger(sum)).toBe(true);
          expect(sum).toBe(onDemandPriceMicros(rateMicros, gpus, total));
          // The same price as the single charge at termination always had.
          expect(sum).toBe(onDemandChargeMicros(rateMicros / 1e6, gpus, total));
        },
      ),
    );
  });
});
