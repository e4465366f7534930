// The cursor of the usage rollups' pages (GET /v1/billing/usage). The rollup is computed
// whole for each page, and ledger lines keep arriving (the current bucket grows, new
// groups appear in it), so an offset moved under the reader: a row came twice or never,
// and the totals changed from page to page. The cursor carries the query it was made for,
// its range's end fixed, and the last row given (its bucket and group): the next page is
// the rows that sort after it in the same range.
import { compareGroups, type Bucket, type Dimension, type RollupRow } from './ledger.js';

export interface UsageQuery {
  from: number;
  to: number;
  bucket: Bucket;
  dimensions: readonly string[];
}

export interface UsageCursor extends UsageQuery {
  /** The last row of the page the cursor follows. */
  last: { start: number; group: Record<string, string | null> };
}

export function encodeUsageCursor(cursor: UsageCursor): string {
  return Buffer.from(JSON.stringify({ v: 1, ...cursor })).toString('base64url');
}

/** The cursor `text` stands for, or null when it is not one this endpoint made. */
export function decodeUsageCursor(text: string): UsageCursor | null {
  try {
    const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Partial<UsageCursor> & { v?: unknown };
    const { v, from, to, bucket, dimensions, last } = value;
    const ok =
      v === 1 &&
      Number.isSafeInteger(from) &&
      Number.isSafeInteger(to) &&
      (bucket === 'hour' || bucket === 'day' || bucket === 'month') &&
      Array.isArray(dimensions) &&
      dimensions.every((d) => typeof d === 'string') &&
      typeof last === 'object' &&
      last !== null &&
      Number.isSafeInteger(last.start) &&
      typeof last.group === 'object' &&
      last.group !== null;
    return ok ? { from: from!, to: to!, bucket: bucket!, dimensions: dimensions!, last: last! } : null;
  } catch {
    return null;
  }
}

/** Whether two queries are the same rollup. */
export function sameQuery(a: UsageQuery, b: UsageQuery): boolean {
  return a.from === b.from && a.to === b.to && a.bucket === b.bucket && a.dimensions.length === b.dimensions.length && a.dimensions.every((d, i) => d === b.dimensions[i]);
}

/** The rows (sorted as rollup() sorts them) that come after `last`. */
export function rowsAfter(rows: readonly RollupRow[], last: UsageCursor['last'], dimensions: readonly Dimension[]): RollupRow[] {
  return rows.filter((r) => r.start > last.start || (r.start === last.start && compareGroups(r.group, last.group, dimensions) > 0));
}
