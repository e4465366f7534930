import { describe, expect, it } from 'vitest';
import { DEFAULT_REPORT_INTERVAL_MS, reportIntervalFrom } from './session.js';

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
