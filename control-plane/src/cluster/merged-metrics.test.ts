import { describe, expect, it } from 'vitest';
import { reuseRecent } from './merged-metrics.js';

/** A producer whose calls are counted and finished by hand. */
function producer() {
  const pending: Array<{ resolve(v: number): void; reject(e: Error): void }> = [];
  let calls = 0;
  const produce = () =>
    new Promise<number>((resolve, reject) => {
      calls++;
      pending.push({ resolve, reject });
    });
  return { produce, calls: () => calls, finish: (v: number) => pending.shift()!.resolve(v), fail: () => pending.shift()!.reject(new Error('down')) };
}

describe('reuseRecent (what a flood of GET /metrics costs the workers)', () => {
  it('shares a running call among every caller: 100 concurrent scrapes, one merge', async () => {
    const p = producer();
    const get = reuseRecent(p.produce, 1_000, () => 0);
    const all = Promise.all(Array.from({ length: 100 }, () => get()));
    p.finish(7);
    expect(await all).toEqual(Array(100).fill(7));
    expect(p.calls()).toBe(1);
  });

  it.each([
    [999, 1],
    [1_000, 2],
  ])('a call %i ms after the last finished makes %i merges in all', async (after, merges) => {
    let now = 0;
    const p = producer();
    const get = reuseRecent(p.produce, 1_000, () => now);
    const first = get();
    p.finish(1);
    await first;
    now = after;
    const second = get();
    if (merges === 2) p.finish(2);
    expect(await second).toBe(merges);
    expect(p.calls()).toBe(merges);
  });

  it('keeps no failure: the next caller tries again', async () => {
    const p = producer();
    const get = reuseRecent(p.produce, 1_000, () => 0);
    const failed = get();
    p.fail();
    await expect(failed).rejects.toThrow('down');
    const retried = get();
    p.finish(3);
    expect(await retried).toBe(3);
    expect(p.calls()).toBe(2);
  });
});
