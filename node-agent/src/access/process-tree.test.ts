import { describe, expect, it } from 'vitest';
import { descendants, parentPidOf } from './process-tree.js';

describe('process tree', () => {
  it('reads the parent pid even when the command name has spaces and parentheses', () => {
    expect(parentPidOf('4185 (sh) S 4160 4185 4185 0 -1 4194560 ...')).toBe(4160);
    expect(parentPidOf('77 (my (odd) name) R 12 77 77 0')).toBe(12);
    expect(parentPidOf('garbage')).toBeUndefined();
  });

  it('lists a process and its descendants, not its siblings or parent', () => {
    const parents = new Map([
      [1, 0],
      [10, 1],
      [11, 10],
      [12, 11],
      [13, 10],
      [20, 1],
    ]);
    expect(descendants(10, parents)).toEqual([10, 11, 13, 12]);
    expect(descendants(20, parents)).toEqual([20]);
  });
});
