import { describe, expect, it } from 'vitest';
import { PullDeadline, STALL_BYTES } from './pull-deadline.js';

const MIB = STALL_BYTES;

describe('PullDeadline', () => {
  it('stops a pull that moves less than 1 MiB within the stall window, and only that one', () => {
    // [bytes moved so far at time t] in order, then when it is overdue and why.
    const table: Array<[string, Array<[number, number]>, number, string | null]> = [
      ['nothing at all', [], 120_000, 'it moved less than 1 MiB in 2 min (the registry stopped sending)'],
      ['nothing yet, inside the window', [], 119_999, null],
      ['a trickle under 1 MiB a window', [[60_000, MIB - 1]], 120_000, 'it moved less than 1 MiB in 2 min (the registry stopped sending)'],
      ['1 MiB at 100 s opens a new window', [[100_000, MIB]], 219_999, null],
      ['…which also ends', [[100_000, MIB]], 220_000, 'it moved less than 1 MiB in 2 min (the registry stopped sending)'],
      ['steady progress, well inside the whole deadline', [[60_000, 10 * MIB], [120_000, 20 * MIB], [180_000, 30 * MIB]], 299_999, null],
      ['steady progress past the whole deadline', [[60_000, 10 * MIB], [120_000, 20 * MIB], [180_000, 30 * MIB], [3_540_000, 5000 * MIB]], 3_600_000, 'it took longer than 60 min'],
    ];
    for (const [name, moves, at, expected] of table) {
      const deadline = new PullDeadline({ stallMs: 120_000, timeoutMs: 3_600_000 }, 0);
      for (const [t, bytes] of moves) deadline.moved(bytes, t);
      expect(deadline.overdue(at), name).toBe(expected);
    }
  });

  it('names short windows in seconds', () => {
    expect(new PullDeadline({ stallMs: 2_000, timeoutMs: 90_500 }, 0).overdue(2_000)).toBe('it moved less than 1 MiB in 2 s (the registry stopped sending)');
    expect(new PullDeadline({ stallMs: 200_000, timeoutMs: 90_500 }, 0).overdue(90_500)).toBe('it took longer than 90.5 s');
  });
});
