import { describe, expect, it } from 'vitest';
import type { Logger } from '@svc/shared';
import { REFUSAL_LOG_INTERVAL_MS, RefusalLog } from './refusal-log.js';

describe('RefusalLog', () => {
  it('writes one line per interval, counting the refusals since the last', () => {
    const lines: Array<[Record<string, unknown>, string]> = [];
    const log = { info: (fields: Record<string, unknown>, message: string) => lines.push([fields, message]) } as unknown as Logger;
    let now = 1_000_000;
    const refusals = new RefusalLog(log, () => now);
    refusals.note('203.0.113.1', 'a cap', 'SSH connection refused');
    for (let i = 0; i < 99; i++) refusals.note('203.0.113.2', 'a cap', 'SSH connection refused');
    now += REFUSAL_LOG_INTERVAL_MS;
    refusals.note('203.0.113.3', 'penalized', 'Jupyter connection refused');
    expect(lines).toEqual([
      [{ ip: '203.0.113.1', why: 'a cap', refused_since_last_line: 1 }, 'SSH connection refused'],
      [{ ip: '203.0.113.3', why: 'penalized', refused_since_last_line: 100 }, 'Jupyter connection refused'],
    ]);
  });
});
