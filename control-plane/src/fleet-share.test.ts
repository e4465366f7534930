import { describe, expect, it } from 'vitest';
import { membershipOf, partOf } from './fleet-share.js';

describe('partOf', () => {
  it.each([
    // [limit, processes, part for each rank]
    [64, 1, [64]],
    [6, 3, [2, 2, 2]],
    [7, 3, [3, 2, 2]],
    [8, 3, [3, 3, 2]],
    [64, 16, Array(16).fill(4)],
    [1, 1, [1]],
    // More processes than units: each still sends one (a process that never could would
    // refuse every request it is given).
    [2, 3, [1, 1, 1]],
  ])('%i in flight over %i processes: %j', (limit, count, parts) => {
    const got = Array.from({ length: count }, (_, rank) => partOf(limit, { count, rank }));
    expect(got).toEqual(parts);
    if (limit >= count) expect(got.reduce((a, b) => a + b, 0)).toBe(limit);
  });
});

describe('membershipOf', () => {
  it.each([
    // [seats (backend pids in order), this process's pid, membership]
    [[101, 202, 303], 202, { count: 3, rank: 1 }],
    [[101], 101, { count: 1, rank: 0 }],
    // Its own seat not taken yet (a check before the lock): counted in, last.
    [[101, 202], 404, { count: 3, rank: 2 }],
    [[], 404, { count: 1, rank: 0 }],
  ])('seats %j, mine %i: %j', (seats, mine, membership) => {
    expect(membershipOf(seats, mine)).toEqual(membership);
  });
});
