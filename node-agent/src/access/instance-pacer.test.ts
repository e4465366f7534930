import { describe, expect, it } from 'vitest';
import { InstancePacer } from './instance-pacer.js';

describe('InstancePacer', () => {
  it('lets an instance make its burst at once, then one call per 1/rate s, each waiting its turn; another instance has its own', () => {
    let clock = 0;
    const pacer = new InstancePacer(10, 3, () => clock);
    expect([1, 2, 3, 4, 5, 6].map(() => pacer.delayFor('inst_a'))).toEqual([0, 0, 0, 100, 200, 300]);
    expect(pacer.delayFor('inst_b')).toBe(0);
    clock += 300; // the waiting calls went out; the bucket is empty again
    expect(pacer.delayFor('inst_a')).toBe(100);
    clock += 10_000;
    expect([1, 2, 3, 4].map(() => pacer.delayFor('inst_a'))).toEqual([0, 0, 0, 100]);
  });

  it('paces nothing at a rate of 0', () => {
    const pacer = new InstancePacer(0, 0, () => 0);
    expect(Array.from({ length: 100 }, () => pacer.delayFor('inst_a')).every((ms) => ms === 0)).toBe(true);
  });

  it('forgets only instances idle long enough to be full again: one still waiting keeps its turn', () => {
    let clock = 0;
    const pacer = new InstancePacer(10, 2, () => clock);
    for (let i = 0; i < 10; i++) pacer.delayFor('inst_busy'); // 8 past its burst: its last call goes out at 800 ms
    for (let i = 0; i < 255; i++) pacer.delayFor(`inst_${i}`);
    clock += 500;
    pacer.delayFor('inst_new'); // the 257th: the others, full again, are forgotten
    expect(pacer.delayFor('inst_busy')).toBe(400); // after its 10th (900 ms), not a fresh burst
    expect(pacer.delayFor('inst_0')).toBe(0);
  });
});
