import { describe, expect, it } from 'vitest';
import { resolveWorkerCount } from './worker-count.js';

describe('SVC_WORKERS', () => {
  it.each([
    ['1', 16, true, 1, false],
    ['4', 2, true, 4, false],
    ['auto', 16, true, 16, false],
    ['auto', 1, true, 1, false],
    ['auto', 0, true, 1, false],
    ['1', 16, false, 1, false],
    ['4', 16, false, 1, true],
    ['auto', 16, false, 1, true],
    ['auto', 1, false, 1, false],
  ])('%s on %i cores (PostgreSQL: %s) runs %i (lowered: %s)', (setting, cores, postgres, count, lowered) => {
    const result = resolveWorkerCount(setting, cores, postgres);
    expect(result.count).toBe(count);
    expect(result.reason !== undefined).toBe(lowered);
    if (lowered) expect(result.reason).toMatch(/SQLite.*SVC_DATABASE_URL/);
  });

  it.each(['0', '-1', '1.5', 'many', ''])('refuses %j', (setting) => {
    expect(() => resolveWorkerCount(setting, 4, true)).toThrow(/SVC_WORKERS/);
  });
});
