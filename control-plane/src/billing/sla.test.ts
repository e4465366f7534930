import { describe, expect, it } from 'vitest';
import { availability, outagesFromTimeline, slaCreditNanos, unionLength, type SlaInputs } from './sla.js';

const H = 3_600_000;
const NOV = { start: Date.UTC(2026, 10, 1), end: Date.UTC(2026, 11, 1) };
const MONTH_MS = NOV.end - NOV.start; // 720 h
const t = (hours: number) => NOV.start + hours * H;
const base: SlaInputs = { mode: 'on_demand', readyAt: t(0), endedAt: null, endedByProvider: false, expiresAt: null, billedUntil: null, outages: [] };

describe('unionLength', () => {
  it.each([
    ['disjoint', [{ start: 0, end: 10 }, { start: 20, end: 30 }], 20],
    ['overlapping', [{ start: 0, end: 10 }, { start: 5, end: 15 }], 15],
    ['nested', [{ start: 0, end: 30 }, { start: 5, end: 15 }], 30],
    ['clipped to the window', [{ start: -50, end: 5 }, { start: 95, end: 500 }], 10],
    ['open-ended, up to now', [{ start: 90, end: null }], 10],
  ] as const)('%s', (_name, intervals, length) => {
    expect(unionLength(intervals, 0, 100, 100)).toBe(length);
  });
});

describe('availability over a month', () => {
  it.each([
    ['no outage', base, 1, true],
    ['2 h node outage of 720 h (99.72%): meets on-demand 99.5%', { ...base, outages: [{ start: t(10), end: t(12) }] }, 1 - 2 / 720, true],
    ['the same outage misses the reserved 99.9%', { ...base, mode: 'reserved', expiresAt: t(2000), outages: [{ start: t(10), end: t(12) }] }, 1 - 2 / 720, false],
    ['overlapping node and GPU outages count once', { ...base, outages: [{ start: t(10), end: t(14) }, { start: t(12), end: t(16) }] }, 1 - 6 / 720, false],
    ['a tenant terminate closes the window', { ...base, endedAt: t(72), outages: [{ start: t(70), end: t(80) }] }, 1 - 2 / 72, false],
    ['a reservation the provider ended owes the rest of its time', { ...base, mode: 'reserved', endedAt: t(100), endedByProvider: true, expiresAt: t(110) }, 1 - 10 / 110, false],
    ['a reservation counts only up to its expiry', { ...base, mode: 'reserved', expiresAt: t(10), outages: [{ start: t(9), end: t(20) }] }, 0.9, false],
    ['ready only from mid-month: the outage before ready does not count', { ...base, readyAt: t(360), outages: [{ start: t(0), end: t(361) }] }, 1 - 1 / 360, true],
  ] as const)('%s', (_name, inputs, value, met) => {
    const result = availability(inputs as SlaInputs, NOV, NOV.end);
    expect(result.availability).toBeCloseTo(value, 12);
    expect(result.met).toBe(met);
  });

  it('counts nothing expected for an instance never ready, or ready after the month', () => {
    expect(availability({ ...base, readyAt: null }, NOV, NOV.end)).toMatchObject({ expectedMs: 0, availability: 1, met: true });
    expect(availability({ ...base, readyAt: NOV.end + H }, NOV, NOV.end + 2 * H).expectedMs).toBe(0);
  });

  it('ends an on-demand window where its billing ended: time given back earns no credit', () => {
    // Ran 1 h, its node went away for 3 days and came back without it: billed to the node's
    // last contact, so the outage after it was never paid for and is not credited.
    const givenBack = { ...base, endedAt: t(73), billedUntil: t(1), outages: [{ start: t(1) + 30_000, end: t(73) }] };
    expect(availability(givenBack, NOV, NOV.end)).toMatchObject({ expectedMs: H, downMs: 0, met: true });
    // Billed past its end (the 60 s minimum): the window still closes at its end.
    expect(availability({ ...base, endedAt: t(0) + 10_000, billedUntil: t(0) + 60_000 }, NOV, NOV.end).expectedMs).toBe(10_000);
    // A reservation is paid up front for its reserved time: its window is unchanged.
    const reserved = { ...base, mode: 'reserved', endedAt: t(100), endedByProvider: true, expiresAt: t(110), billedUntil: t(1) } as const;
    expect(availability(reserved, NOV, NOV.end).expectedMs).toBe(110 * H);
  });

  it('measures the month so far while it runs', () => {
    const result = availability({ ...base, outages: [{ start: t(9), end: null }] }, NOV, t(10));
    expect(result).toMatchObject({ expectedMs: 10 * H, downMs: H });
  });
  expect(MONTH_MS).toBe(720 * H);
});

describe('slaCreditNanos', () => {
  const rate = 2_990_000_000; // $2.99 per hour, in nanos
  it.each([
    ['met: nothing', 1, 0],
    ['just under target: 10%', 0.994, 0.1],
    ['under 99%: 30%', 0.985, 0.3],
    ['under 95%: everything', 0.9, 1],
  ] as const)('%s', (_name, value, share) => {
    const result = { expectedMs: 720 * H, downMs: (1 - value) * 720 * H, availability: value, target: 0.995, met: value >= 0.995 };
    expect(slaCreditNanos(result, rate)).toBe(Math.round(rate * 720 * share));
  });
});

describe('outagesFromTimeline', () => {
  it('pairs node down/up and GPU unhealthy/recovered for the GPUs of the instance only', () => {
    const events = [
      { kind: 'node_down', gpuUuid: null, healthy: null, at: 10 },
      { kind: 'node_up', gpuUuid: null, healthy: null, at: 20 },
      { kind: 'xid', gpuUuid: 'GPU-other', healthy: false, at: 25 },
      { kind: 'xid', gpuUuid: 'GPU-mine', healthy: false, at: 30 },
      { kind: 'xid', gpuUuid: 'GPU-mine', healthy: false, at: 35 },
      { kind: 'recovered', gpuUuid: 'GPU-mine', healthy: true, at: 40 },
      { kind: 'node_down', gpuUuid: null, healthy: null, at: 50 },
    ];
    expect(outagesFromTimeline(events, ['GPU-mine'])).toEqual([
      { start: 10, end: 20 },
      { start: 30, end: 40 },
      { start: 50, end: null },
    ]);
  });
});
