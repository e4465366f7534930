import { describe, expect, it } from 'vitest';
import { resolveNodeTiming } from './timing.js';

describe('resolveNodeTiming', () => {
  it('defaults the deadline to 3 intervals and the flush to one interval', () => {
    expect(resolveNodeTiming({ reportIntervalMs: 5000, nodeDeadlineMs: 0, telemetryFlushMs: 0 })).toEqual({
      reportIntervalMs: 5000,
      deadlineMs: 15_000,
      flushMs: 5000,
      sweepMs: 1000,
    });
  });

  it('sweeps faster for short test deadlines', () => {
    expect(resolveNodeTiming({ reportIntervalMs: 100, nodeDeadlineMs: 400, telemetryFlushMs: 0 }).sweepMs).toBe(100);
  });

  it('refuses a deadline that does not exceed the report interval', () => {
    expect(() => resolveNodeTiming({ reportIntervalMs: 5000, nodeDeadlineMs: 5000, telemetryFlushMs: 0 })).toThrow(
      /SVC_NODE_DEADLINE_MS \(5000\) must exceed SVC_REPORT_INTERVAL_MS \(5000\)/,
    );
  });

  it('refuses a flush slower than the deadline', () => {
    expect(() => resolveNodeTiming({ reportIntervalMs: 1000, nodeDeadlineMs: 3000, telemetryFlushMs: 4000 })).toThrow(
      /SVC_TELEMETRY_FLUSH_MS/,
    );
  });
});
