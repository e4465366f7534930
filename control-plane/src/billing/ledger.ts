// The ledger as the billing API reads it: one line per billable fact (a compute charge, a
// served inference request, a credit), in integer nano-dollars, and the pure rules that
// turn lines into usage rollups. The store aggregates by hour in SQL (`HourRow`); the
// functions here merge hours into days and months, so a rollup never scans every line.

export const NANOS_PER_USD = 1_000_000_000;
export const NANOS_PER_MICRO = 1_000;

export type LedgerKind = 'on_demand' | 'reservation' | 'extension' | 'refund' | 'inference' | 'grant' | 'sla_credit';
export const LEDGER_KINDS: readonly LedgerKind[] = ['on_demand', 'reservation', 'extension', 'refund', 'inference', 'grant', 'sla_credit'];

export interface LedgerLine {
  id: string;
  orgId: string;
  kind: LedgerKind;
  /** Nano-dollars; negative for money back (refunds, credits). */
  amountNanos: number;
  createdAt: number;
  instanceId: string | null;
  requestId: string | null;
  keyId: string | null;
  model: string | null;
  sku: string | null;
  pool: string | null;
  labels: Record<string, string>;
  inputTokens: number;
  outputTokens: number;
  gpuSeconds: number;
  requests: number;
  description: string;
}

export type Bucket = 'hour' | 'day' | 'month';
export type Dimension = 'model' | 'key_id' | 'instance_id' | 'sku' | 'pool' | 'kind' | `label:${string}`;

export interface Quantities {
  amountNanos: number;
  inputTokens: number;
  outputTokens: number;
  gpuSeconds: number;
  requests: number;
  lines: number;
}

/** One hour of one group, as the store sums it. `group` holds one value per requested dimension, in order. */
export interface HourRow extends Quantities {
  hourStart: number;
  group: Array<string | null>;
}

export interface RollupRow extends Quantities {
  start: number;
  end: number;
  group: Record<string, string | null>;
}

const LABEL_NAME = /^[A-Za-z0-9_.\-/]{1,63}$/;
const PLAIN_DIMENSIONS = new Set(['model', 'key_id', 'instance_id', 'sku', 'pool', 'kind']);

/** Parses `group_by` (comma-separated or repeated); returns an error message for the first bad entry. */
export function parseDimensions(values: readonly string[]): { dimensions: Dimension[] } | { error: string } {
  const dimensions: Dimension[] = [];
  for (const value of values.flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean)) {
    const valid = PLAIN_DIMENSIONS.has(value) || (value.startsWith('label:') && LABEL_NAME.test(value.slice(6)));
    if (!valid) return { error: `group_by "${value}" is not one of model, key_id, instance_id, sku, pool, kind, label:<name>` };
    if (!dimensions.includes(value as Dimension)) dimensions.push(value as Dimension);
  }
  if (dimensions.length > 4) return { error: 'group_by takes at most 4 dimensions' };
  return { dimensions };
}

const HOUR_MS = 3_600_000;

/** The UTC start of the bucket holding `ms`. */
export function bucketStart(ms: number, bucket: Bucket): number {
  const d = new Date(ms);
  if (bucket === 'hour') return Math.floor(ms / HOUR_MS) * HOUR_MS;
  if (bucket === 'day') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** The UTC end (exclusive) of the bucket starting at `start`. */
export function bucketEnd(start: number, bucket: Bucket): number {
  const d = new Date(start);
  if (bucket === 'hour') return start + HOUR_MS;
  if (bucket === 'day') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

export function dimensionValue(line: LedgerLine, dimension: Dimension): string | null {
  switch (dimension) {
    case 'model':
      return line.model;
    case 'key_id':
      return line.keyId;
    case 'instance_id':
      return line.instanceId;
    case 'sku':
      return line.sku;
    case 'pool':
      return line.pool;
    case 'kind':
      return line.kind;
    default:
      return line.labels[dimension.slice(6)] ?? null;
  }
}

const zero = (): Quantities => ({ amountNanos: 0, inputTokens: 0, outputTokens: 0, gpuSeconds: 0, requests: 0, lines: 0 });

function add(into: Quantities, from: Quantities): void {
  into.amountNanos += from.amountNanos;
  into.inputTokens += from.inputTokens;
  into.outputTokens += from.outputTokens;
  into.gpuSeconds += from.gpuSeconds;
  into.requests += from.requests;
  into.lines += from.lines;
}

/** Sums lines by hour and group: what the store's SQL computes, as a reference. */
export function hourRows(lines: readonly LedgerLine[], dimensions: readonly Dimension[]): HourRow[] {
  const rows = new Map<string, HourRow>();
  for (const line of lines) {
    const hourStart = bucketStart(line.createdAt, 'hour');
    const group = dimensions.map((d) => dimensionValue(line, d));
    const id = JSON.stringify([hourStart, group]);
    let row = rows.get(id);
    if (!row) rows.set(id, (row = { hourStart, group, ...zero() }));
    add(row, { ...line, lines: 1 });
  }
  return [...rows.values()];
}

/** Merges hour rows into `bucket`s, ordered by bucket start, then by group values. */
export function rollup(rows: readonly HourRow[], dimensions: readonly Dimension[], bucket: Bucket): RollupRow[] {
  const merged = new Map<string, RollupRow>();
  for (const row of rows) {
    const start = bucketStart(row.hourStart, bucket);
    const id = JSON.stringify([start, row.group]);
    let out = merged.get(id);
    if (!out) {
      const group = Object.fromEntries(dimensions.map((d, i) => [d, row.group[i] ?? null]));
      merged.set(id, (out = { start, end: bucketEnd(start, bucket), group, ...zero() }));
    }
    add(out, row);
  }
  return [...merged.values()].sort((a, b) => a.start - b.start || compareGroups(a.group, b.group, dimensions));
}

export function compareGroups(a: Record<string, string | null>, b: Record<string, string | null>, dimensions: readonly Dimension[]): number {
  for (const d of dimensions) {
    const x = a[d] ?? '';
    const y = b[d] ?? '';
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

export function totals(rows: readonly Quantities[]): Quantities {
  const sum = zero();
  for (const row of rows) add(sum, row);
  return sum;
}

/** Nano-dollars as a decimal USD string with nine places: exact, no float rounding. */
export function nanosToUsdString(nanos: number): string {
  const sign = nanos < 0 ? '-' : '';
  const abs = Math.abs(nanos);
  const whole = Math.floor(abs / NANOS_PER_USD);
  const frac = String(abs % NANOS_PER_USD).padStart(9, '0');
  return `${sign}${whole}.${frac}`;
}

function csvField(value: string): string {
  // RFC 4180 quoting; a leading = + - @ is prefixed so a spreadsheet does not run it as a
  // formula. Only a whole number keeps its minus: `-2+3+cmd|' /C calc'!A0` is a formula.
  const safe = /^[=+\-@\t\r]/.test(value) && !/^-?\d+(\.\d+)?$/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** The rollup as CSV (RFC 4180, CRLF line ends), amounts in exact decimal USD. */
export function rollupCsv(rows: readonly RollupRow[], dimensions: readonly Dimension[]): string {
  const header = ['start', 'end', ...dimensions, 'amount_usd', 'input_tokens', 'output_tokens', 'gpu_seconds', 'requests'];
  const lines = rows.map((r) =>
    [
      new Date(r.start).toISOString(),
      new Date(r.end).toISOString(),
      ...dimensions.map((d) => r.group[d] ?? ''),
      nanosToUsdString(r.amountNanos),
      String(r.inputTokens),
      String(r.outputTokens),
      String(r.gpuSeconds),
      String(r.requests),
    ]
      .map(csvField)
      .join(','),
  );
  return [header.map(csvField).join(','), ...lines].join('\r\n') + '\r\n';
}
