// Time ranges in query strings: RFC 3339 timestamps with a zone, or plain dates (midnight UTC).
import { ApiError } from '@svc/shared';

const SHAPE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** `value` as epoch ms; a 400 naming `param` when it is neither form. */
export function parseTimeParam(value: string, param: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(value) ? Date.parse(`${value}T00:00:00Z`) : Date.parse(value);
  if (!SHAPE.test(value) || !Number.isFinite(ms)) {
    throw new ApiError('invalid_request', `${param} must be an RFC 3339 timestamp with a zone (2026-11-01T00:00:00Z) or a date (2026-11-01)`, { param });
  }
  return ms;
}

/** Both ends parsed; a 400 when `to` is not after `from`. */
export function parseTimeRange(from: string | undefined, to: string | undefined): { from?: number; to?: number } {
  const range = { ...(from !== undefined ? { from: parseTimeParam(from, 'from') } : {}), ...(to !== undefined ? { to: parseTimeParam(to, 'to') } : {}) };
  if (range.from !== undefined && range.to !== undefined && range.to <= range.from) throw new ApiError('invalid_request', 'to must be after from', { param: 'to' });
  return range;
}
