import { describe, expect, it } from 'vitest';
import { FairShare } from './fair-share.js';

/** Slots held by site, oldest first, as "site:name". */
function holding(entries: string[]) {
  const share = new FairShare();
  const dropped: string[] = [];
  const slots = new Map(entries.map((e) => [e, share.add(e.split(':')[0]!, () => dropped.push(e))]));
  return { share, dropped, slots };
}

describe('FairShare', () => {
  it.each([
    // [slots held, oldest first; newcomer's site; the slot it may take]
    [['a:1', 'a:2', 'b:1'], 'c', 'a:1'], // the site holding the most gives up its oldest
    [['b:1', 'a:1', 'a:2'], 'c', 'a:1'],
    [['a:1', 'b:1'], 'c', 'a:1'], // a tie: the oldest slot
    [['a:1', 'b:1', 'b:2'], 'a', 'b:1'], // b holds more than the newcomer's a
    [['a:1', 'a:2', 'b:1'], 'a', undefined], // never from itself, nor from one holding fewer
    [['a:1', 'b:1'], 'a', undefined], // b holds no more than a does
    [[], 'a', undefined],
  ])('held %j, a newcomer from %s may take %s', (entries, site, expected) => {
    const { share, slots } = holding(entries);
    const victim = share.victimFor(site);
    expect(victim === undefined ? undefined : [...slots].find(([, s]) => s === victim)![0]).toBe(expected);
  });

  it('a dropped slot is released and its holder told once; releasing twice is once', () => {
    const { share, dropped, slots } = holding(['a:1', 'a:2', 'b:1']);
    share.victimFor('c')!.drop();
    slots.get('a:1')!.drop();
    slots.get('a:1')!.release();
    expect(dropped).toEqual(['a:1']);
    expect([share.size, share.heldBy('a'), share.heldBy('b')]).toEqual([2, 1, 1]);
    slots.get('b:1')!.release();
    slots.get('b:1')!.drop(); // released: nothing to give up
    expect([share.size, dropped]).toEqual([1, ['a:1']]);
  });
});
