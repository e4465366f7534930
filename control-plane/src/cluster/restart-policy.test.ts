import { describe, expect, it } from 'vitest';
import { nextCrashStreak, restartDelayMs, RESTART_MAX_MS, STABLE_AFTER_MS } from './restart-policy.js';

describe('worker restart policy', () => {
  it.each([
    [1, 100],
    [2, 200],
    [3, 400],
    [5, 1_600],
    [8, RESTART_MAX_MS],
    [50, RESTART_MAX_MS],
  ])('the %i-th quick crash in a row waits %i ms', (streak, delay) => {
    expect(restartDelayMs(streak)).toBe(delay);
  });

  it.each([
    [0, 10, 1],
    [3, 10, 4],
    [3, STABLE_AFTER_MS - 1, 4],
    [7, STABLE_AFTER_MS, 1],
    [7, 3_600_000, 1],
  ])('streak %i, then a worker that lived %i ms: streak %i', (previous, lived, next) => {
    expect(nextCrashStreak(previous, lived)).toBe(next);
  });
});
