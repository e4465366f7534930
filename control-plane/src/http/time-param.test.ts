import { describe, expect, it } from 'vitest';
import { parseTimeParam, parseTimeRange } from './time-param.js';

describe('parseTimeParam', () => {
  it.each([
    ['2026-11-01', Date.UTC(2026, 10, 1)],
    ['2026-02-28', Date.UTC(2026, 1, 28)],
    ['2028-02-29', Date.UTC(2028, 1, 29)],
    ['2026-11-01T10:30:00Z', Date.UTC(2026, 10, 1, 10, 30)],
    ['2026-11-01T23:59:59.999Z', Date.UTC(2026, 10, 1, 23, 59, 59, 999)],
    ['2026-11-01T10:30+02:00', Date.UTC(2026, 10, 1, 8, 30)],
  ])('%s is %d', (value, ms) => expect(parseTimeParam(value, 'from')).toBe(ms));

  // What V8's Date.parse rolls over into another day.
  it.each(['2026-02-30', '2026-02-29', '2026-04-31T10:00:00Z', '2026-11-01T24:00Z'])(
    '%s is no real time: 400, not another day',
    (value) => {
      expect(() => parseTimeParam(value, 'from')).toThrow(expect.objectContaining({ type: 'invalid_request', param: 'from', message: `from: ${value} is not a real date and time` }));
    },
  );

  it.each(['yesterday', '2026-11-01T10:00', '1700000000', '2026-1-1', '2026-13-01', '2026-00-10', '2026-11-00', '2026-11-01T10:60Z', '2026-11-01T10:00:60Z', '2026-11-01T10:00+24:00'])('%s is neither form: 400', (value) => {
    expect(() => parseTimeParam(value, 'to')).toThrow(expect.objectContaining({ type: 'invalid_request', param: 'to', message: expect.stringMatching(/RFC 3339|not a real date/) }));
  });

  it('refuses a range whose end is not after its start', () => {
    expect(() => parseTimeRange('2026-11-02', '2026-11-01')).toThrow(expect.objectContaining({ param: 'to' }));
    expect(parseTimeRange('2026-11-01', '2026-11-02')).toEqual({ from: Date.UTC(2026, 10, 1), to: Date.UTC(2026, 10, 2) });
  });
});
