import { describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { snapshotCache } from './snapshot-cache.js';

describe('snapshotCache', () => {
  it('shares one load among concurrent callers and reuses it until the TTL passes', async () => {
    const clock = new ManualClock(1_000);
    let loads = 0;
    let release!: () => void;
    const cache = snapshotCache(async () => {
      loads++;
      await new Promise<void>((r) => (release = r));
      return loads;
    }, 500, clock);
    const waiting = Array.from({ length: 100 }, () => cache.get());
    release();
    expect(new Set(await Promise.all(waiting))).toEqual(new Set([1]));
    clock.advance(499);
    expect(await cache.get()).toBe(1);
    clock.advance(1);
    const next = cache.get();
    release();
    expect(await next).toBe(2);
    expect(loads).toBe(2);
  });

  it('keeps a failed load for the TTL too (a store in trouble is not asked by every request), then tries again', async () => {
    const clock = new ManualClock(0);
    let calls = 0;
    const cache = snapshotCache(async () => {
      calls++;
      if (calls === 1) throw new Error('store down');
      return 'ok';
    }, 1_000, clock);
    await expect(cache.get()).rejects.toThrow('store down');
    clock.advance(999);
    await expect(cache.get()).rejects.toThrow('store down');
    expect(calls).toBe(1);
    clock.advance(1);
    expect(await cache.get()).toBe('ok');
    expect(calls).toBe(2);
  });
});
