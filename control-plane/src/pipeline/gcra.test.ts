import { describe, expect, it } from 'vitest';
import { gcraCredit, gcraResult, gcraStep } from './gcra.js';
import { credit, take, type Bucket } from './token-bucket.js';

const NOW = 1_750_000_000_000; // an epoch-sized clock: floats must hold up at this scale

describe('GCRA step', () => {
  it.each([
    // [case, tat before, limit, now offset, cost, admitted, tat after (offset)]
    ['a new key is a full bucket', undefined, 1200, 0, 1, true, 50],
    ['a tat in the past is a full bucket', NOW - 5_000, 1200, 0, 1, true, 50],
    ['the last token of a minute fits', NOW + 59_950, 1200, 0, 1, true, 60_000],
    ['one past a minute is refused and changes nothing', NOW + 60_000, 1200, 0, 1, false, 60_000],
    ['time pays a token back', NOW + 60_000, 1200, 50, 1, true, 60_050],
    ['a limit that does not divide a minute admits its last unit', NOW + (6 * 60_000) / 7, 7, 0, 1, true, 60_000],
    ['a cost above the limit never fits', undefined, 100, 0, 101, false, 0],
    ['a cost of exactly the limit fits an idle key', undefined, 100, 0, 100, true, 60_000],
  ] as const)('%s', (_case, tat, limit, offset, cost, admitted, after) => {
    const step = gcraStep(tat, limit, NOW + offset, cost);
    expect(step.admitted).toBe(admitted);
    expect(step.tat - NOW).toBeCloseTo(after, 6);
  });

  it('admits exactly `limit` requests at one instant, then nothing', () => {
    for (const limit of [1, 7, 1200, 12_000]) {
      let tat: number | undefined;
      let admitted = 0;
      for (let i = 0; i < limit + 50; i++) {
        const step = gcraStep(tat, limit, NOW, 1);
        tat = step.tat;
        if (step.admitted) admitted++;
      }
      expect(admitted, `limit ${limit}`).toBe(limit);
    }
  });
});

describe('GCRA against the token bucket', () => {
  // Same arrivals (time, cost) and credits through both: same decisions and headers.
  it.each([
    ['a burst then a trickle', 3, [[0, 1], [0, 1], [0, 1], [0, 1], [19_999, 1], [20_000, 1], [30_000, 1]]],
    ['costs above one, and credits both ways', 1000, [[0, 600], [0, 500], [1_000, 'credit', 300], [1_000, 500], [5_000, 'credit', -400], [6_000, 100], [90_000, 1000]]],
    ['a cost above the limit', 100, [[0, 101], [0, 100], [0, 1]]],
  ] as const)('%s', (_case, limit, arrivals) => {
    let bucket: Bucket | undefined;
    let tat: number | undefined;
    for (const arrival of arrivals) {
      const now = NOW + arrival[0];
      if (arrival[1] === 'credit') {
        const amount = arrival[2] as number;
        bucket = credit(bucket, limit, now, amount);
        tat = gcraCredit(tat, limit, now, amount);
        continue;
      }
      const cost = arrival[1];
      const fromBucket = take(bucket, limit, now, cost);
      bucket = fromBucket.bucket;
      const step = gcraStep(tat, limit, now, cost);
      tat = step.tat;
      expect(gcraResult(step.tat, step.admitted, limit, now, cost), `at +${arrival[0]} cost ${cost}`).toEqual(fromBucket.result);
    }
  });
});
