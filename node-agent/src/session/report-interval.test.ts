import { describe, expect, it } from 'vitest';
import { ackDeadlineMs, DEFAULT_REPORT_INTERVAL_MS, reportIntervalFrom } from './session.js';

describe('reportIntervalFrom', () => {
  it.each([
    [5000, 5000],
    [250, 250],
    [100, 100],
    [1, 100], // raised: a bad value cannot spin the agent
    [0, DEFAULT_REPORT_INTERVAL_MS], // unset by the server
  ])('%i ms from the server reports every %i ms', (server, expected) => {
    expect(reportIntervalFrom(server)).toBe(expected);
  });
});

describe('ackDeadlineMs', () => {
  it('gives the control plane five report intervals and two seconds to acknowledge', () => {
    expect(ackDeadlineMs(5000)).toBe(27_000);
    expect(ackDeadlineMs(100)).toBe(2_500);
  });
});
