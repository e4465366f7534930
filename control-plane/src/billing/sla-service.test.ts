// When an on-demand instance's SLA credit waits for its bill to settle (sla-service.ts).
import { describe, expect, it } from 'vitest';
import { billingPeriod } from './periods.js';
import { billSettled, mayHaveBeenHeld } from './sla-service.js';

const DEC_1 = Date.UTC(2026, 11, 1);
const JAN_1 = Date.UTC(2027, 0, 1);
const NOVEMBER = billingPeriod(Date.UTC(2026, 10, 15));
const H = 3_600_000;
const onDemand = { mode: 'on_demand' as const, endedAt: null, status: 'ready' as const };

describe('billSettled', () => {
  it('holds a running on-demand instance while its node is away, back under a minute, or it drains', () => {
    expect(billSettled(onDemand, [], DEC_1)).toBe(true);
    expect(billSettled(onDemand, [{ start: DEC_1 - H, end: null }], DEC_1)).toBe(false);
    expect(billSettled(onDemand, [{ start: DEC_1 - H, end: DEC_1 - 30_000 }], DEC_1)).toBe(false);
    expect(billSettled(onDemand, [{ start: DEC_1 - H, end: DEC_1 - 61_000 }], DEC_1)).toBe(true);
    expect(billSettled({ ...onDemand, status: 'draining' }, [], DEC_1)).toBe(false);
  });

  it('never holds an ended instance or a reservation', () => {
    expect(billSettled({ ...onDemand, endedAt: DEC_1 - 1, status: 'terminated' }, [{ start: DEC_1 - H, end: null }], DEC_1)).toBe(true);
    expect(billSettled({ ...onDemand, mode: 'reserved' }, [{ start: DEC_1 - H, end: null }], DEC_1)).toBe(true);
  });
});

describe('mayHaveBeenHeld', () => {
  it('a month whose end its node was away across, or that it outlived into the next month', () => {
    expect(mayHaveBeenHeld(onDemand, [{ start: DEC_1 - H, end: DEC_1 + H }], NOVEMBER)).toBe(true);
    expect(mayHaveBeenHeld(onDemand, [{ start: DEC_1 - H, end: null }], NOVEMBER)).toBe(true);
    // Away from 2 December: the month-end issuance may have run late into that.
    expect(mayHaveBeenHeld(onDemand, [{ start: DEC_1 + 24 * H, end: DEC_1 + 48 * H }], NOVEMBER)).toBe(true);
    expect(mayHaveBeenHeld({ ...onDemand, endedAt: DEC_1 + H }, [], NOVEMBER)).toBe(true);
  });

  it('not a month it ended in, nor one nothing held up', () => {
    expect(mayHaveBeenHeld({ ...onDemand, endedAt: DEC_1 - H }, [{ start: DEC_1 - 2 * H, end: null }], NOVEMBER)).toBe(false);
    expect(mayHaveBeenHeld(onDemand, [], NOVEMBER)).toBe(false);
    expect(mayHaveBeenHeld(onDemand, [{ start: DEC_1 - 48 * H, end: DEC_1 - 24 * H }], NOVEMBER)).toBe(false);
    expect(mayHaveBeenHeld(onDemand, [{ start: JAN_1, end: null }], NOVEMBER)).toBe(false);
    expect(mayHaveBeenHeld({ ...onDemand, endedAt: JAN_1 + H }, [], NOVEMBER)).toBe(false);
    expect(mayHaveBeenHeld({ ...onDemand, mode: 'reserved' }, [{ start: DEC_1 - H, end: null }], NOVEMBER)).toBe(false);
  });
});
