import { describe, expect, it } from 'vitest';
import { WriteOrder } from './write-order.js';

const bytes = (text: string): Buffer => Buffer.from(text);
/** Offers writes in turn; what was streamed, as text, or the first refusal. */
function play(writes: Array<[number, string]>, window = 8, start = 0): { streamed: string; refused?: string; next: number; waiting: number } {
  const order = new WriteOrder(start, window);
  let streamed = '';
  for (const [offset, text] of writes) {
    const verdict = order.offer(offset, bytes(text));
    if (!verdict.ok) return { streamed, refused: verdict.reason, next: order.next, waiting: order.waiting };
    streamed += verdict.flush.map((b) => b.toString()).join('');
  }
  return { streamed, next: order.next, waiting: order.waiting };
}

describe('putting SFTP writes in order', () => {
  it.each([
    ['in order', [[0, 'ab'], [2, 'cd'], [4, 'ef']], { streamed: 'abcdef', next: 6, waiting: 0 }],
    ['one early write waits for its gap', [[2, 'cd'], [0, 'ab']], { streamed: 'abcd', next: 4, waiting: 0 }],
    ['several early ones, filled from the front', [[4, 'ef'], [2, 'cd'], [0, 'ab'], [6, 'g']], { streamed: 'abcdefg', next: 7, waiting: 0 }],
    ['early bytes still waiting', [[0, 'ab'], [4, 'ef']], { streamed: 'ab', next: 2, waiting: 2 }],
    ['an empty write anywhere', [[0, 'ab'], [99, ''], [2, 'c']], { streamed: 'abc', next: 3, waiting: 0 }],
  ] as const)('%s', (_what, writes, expected) => {
    expect(play(writes as unknown as Array<[number, string]>)).toEqual(expected);
  });

  it.each([
    ['a write behind what was streamed', [[0, 'abcd'], [2, 'xx']], /goes back over bytes already written \(up to 4\)/],
    ['a write repeated', [[0, 'ab'], [0, 'ab']], /goes back over/],
    ['a write too far ahead of the window', [[0, 'ab'], [10, 'x']], /more than 8 bytes ahead/],
    ['early writes past the window in total', [[2, 'cdef'], [6, 'ghijk']], /more than 8 bytes ahead/],
    ['overlapping early writes', [[4, 'efgh'], [6, 'gh']], /overlaps one at 4/],
    ['an early write that overlaps the gap filler', [[3, 'd'], [0, 'abcd']], /overlaps bytes already written/],
    ['a negative offset', [[-1, 'a']], /bad offset/],
  ] as const)('refuses %s', (_what, writes, reason) => {
    expect(play(writes as unknown as Array<[number, string]>).refused).toMatch(reason);
  });

  it('starts where a resumed upload starts', () => {
    expect(play([[100, 'xy'], [102, 'z']], 8, 100)).toEqual({ streamed: 'xyz', next: 103, waiting: 0 });
    expect(play([[0, 'a']], 8, 100).refused).toMatch(/goes back over/);
  });

  it('says where the hole is while writes wait', () => {
    const order = new WriteOrder(0, 16);
    order.offer(4, bytes('efgh'));
    expect(order.hole).toBe(0);
    order.offer(0, bytes('abcd'));
    expect(order.hole).toBeUndefined();
  });
});
