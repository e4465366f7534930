// Time ranges in query strings: RFC 3339 timestamps with a zone, or plain dates (midnight UTC).
import { ApiError } from '@svc/shared';

const SHAPE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/**
 * Whether the fields name a real time: V8's Date.parse rolls an impossible one over
 * (2026-02-30 is March 2, T24:00 the next day), so a range would quietly cover other days.
 */
function isRealTime([, year, month, day, hour = '0', minute = '0', second = '0', offsetHours = '0', offsetMinutes = '0']: RegExpExecArray): boolean {
  const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  const calendar = date.getUTCFullYear() === Number(year) && date.getUTCMonth() === Number(month) - 1 && date.getUTCDate() === Number(day);
  return calendar && Number(hour) <= 23 && Number(minute) <= 59 && Number(second) <= 59 && Number(offsetHours) <= 23 && Number(offsetMinutes) <= 59;
}

/** `value` as epoch ms; a 400 naming `param` when it is neither form, or no such time. */
export function parseTimeParam(value: string, param: string): number {
  const fields = SHAPE.exec(value);
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(value) ? Date.parse(`${value}T00:00:00Z`) : Date.parse(value);
  if (!fields || !Number.isFinite(ms)) {
    throw new ApiError('invalid_request', `${param} must be an RFC 3339 timestamp with a zone (2026-11-01T00:00:00Z) or a date (2026-11-01)`, { param });
  }
  if (!isRealTime(fields)) throw new ApiError('invalid_request', `${param}: ${value} is not a real date and time`, { param });
  return ms;
}

/** Both ends parsed; a 400 when `to` is not after `from`. */
export function parseTimeRange(from: string | undefined, to: string | undefined): { from?: number; to?: number } {
  const range = { ...(from !== undefined ? { from: parseTimeParam(from, 'from') } : {}), ...(to !== undefined ? { to: parseTimeParam(to, 'to') } : {}) };
  if (range.from !== undefined && range.to !== undefined && range.to <= range.from) throw new ApiError('invalid_request', 'to must be after from', { param: 'to' });
  return range;
}
