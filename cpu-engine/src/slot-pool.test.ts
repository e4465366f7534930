import { describe, expect, it } from 'vitest';
import { SlotPool } from './slot-pool.js';

describe('SlotPool', () => {
  it('hands out free slots at once and queues the rest in arrival order', async () => {
    const pool = new SlotPool(['s1', 's2']);
    expect(await pool.acquire()).toBe('s1');
    expect(await pool.acquire()).toBe('s2');
    const order: string[] = [];
    const third = pool.acquire().then((s) => order.push(`third:${s}`));
    const fourth = pool.acquire().then((s) => order.push(`fourth:${s}`));
    expect(pool.waiting).toBe(2);
    pool.release('s2');
    pool.release('s1');
    await Promise.all([third, fourth]);
    expect(order).toEqual(['third:s2', 'fourth:s1']);
    expect(pool.available).toBe(0);
  });

  it('drops a waiter whose signal aborts, and gives its turn to the next', async () => {
    const pool = new SlotPool(['only']);
    await pool.acquire();
    const controller = new AbortController();
    const gone = pool.acquire(controller.signal);
    const next = pool.acquire();
    controller.abort(new Error('client left'));
    await expect(gone).rejects.toThrow('client left');
    expect(pool.waiting).toBe(1);
    pool.release('only');
    expect(await next).toBe('only');
  });

  it('rejects at once when the signal has already fired', async () => {
    const pool = new SlotPool([1]);
    await expect(pool.acquire(AbortSignal.abort(new Error('late')))).rejects.toThrow('late');
    expect(pool.available).toBe(1);
  });

  it('gives the slot back after work, even when the work fails', async () => {
    const pool = new SlotPool(['s']);
    await expect(pool.with(undefined, async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    expect(pool.available).toBe(1);
    expect(await pool.with(undefined, async (s) => `${s}!`)).toBe('s!');
  });

  it('needs at least one slot', () => {
    expect(() => new SlotPool([])).toThrow(/at least one slot/);
  });
});
