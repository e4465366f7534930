// When a delivery is tried again, and when it is given up. Pure functions: the worker
// passes the clock's time and a random source.
//
// The schedule follows Standard Webhooks' example: immediately, 5 s, 5 min, 30 min, 2 h,
// 5 h, 10 h, 10 h; after the last attempt fails (about 27 h after the first) the
// delivery is given up. Entry i is the wait before attempt i + 1.

export const DEFAULT_RETRY_SCHEDULE = ['0s', '5s', '5m', '30m', '2h', '5h', '10h', '10h'];

/** Each wait is spread by +/- this fraction so endpoints that failed together do not retry together. */
export const JITTER_FRACTION = 0.2;

/** A Retry-After longer than this is cut to it: a header must not park deliveries for days. */
export const MAX_RETRY_AFTER_MS = 10 * 3600_000;

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
export const DURATION_PATTERN = '^\\d+(ms|s|m|h)$';

/** "5s" -> 5000. */
export function parseDuration(text: string): number {
  const match = /^(\d+)(ms|s|m|h)$/.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a duration like 500ms, 5s, 5m or 2h`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

/** The schedule as milliseconds; its first entry is the wait before the first attempt. */
export function parseSchedule(entries: readonly string[]): number[] {
  if (entries.length === 0) throw new Error('the retry schedule needs at least one entry');
  return entries.map(parseDuration);
}

/**
 * The wait before the next attempt after `failedAttempts` attempts of the current run
 * failed, or null when the schedule is used up. `random` is in [0, 1).
 */
export function backoffDelay(schedule: readonly number[], failedAttempts: number, random: number): number | null {
  const base = schedule[failedAttempts];
  if (base === undefined) return null;
  return Math.round(base * (1 - JITTER_FRACTION + 2 * JITTER_FRACTION * random));
}

/**
 * A Retry-After header as milliseconds from `now`: delay-seconds or an HTTP date.
 * Unreadable values count as absent; past dates as zero; long ones are capped.
 */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  let ms: number;
  if (/^\d+$/.test(text)) ms = Number(text) * 1000;
  else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return null;
    ms = Math.max(0, at - now);
  }
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}

/** What one attempt came to, as the sender saw it. */
export interface AttemptOutcome {
  /** HTTP status, or null when no response came (refused, timed out, reset, blocked). */
  statusCode: number | null;
  error: string | null;
  retryAfter: string | undefined;
  durationMs: number;
}

export type AttemptDecision =
  | { kind: 'succeeded' }
  | { kind: 'retry'; at: number }
  | { kind: 'give_up'; reason: string }
  /** 410 Gone: the endpoint asks us to stop; the subscription is disabled. */
  | { kind: 'disable'; reason: string };

/**
 * What follows an attempt. Only 2xx counts as delivered. `failedBefore` is how many
 * attempts of the current run (since creation or a manual redeliver) failed before this one.
 */
export function decideAfterAttempt(input: {
  outcome: AttemptOutcome;
  failedBefore: number;
  schedule: readonly number[];
  now: number;
  random: number;
}): AttemptDecision {
  const { outcome, schedule, now } = input;
  const status = outcome.statusCode;
  if (status !== null && status >= 200 && status < 300) return { kind: 'succeeded' };
  if (status === 410) return { kind: 'disable', reason: 'the endpoint answered 410 Gone' };
  const backoff = backoffDelay(schedule, input.failedBefore + 1, input.random);
  if (backoff === null) {
    return { kind: 'give_up', reason: `${schedule.length} attempts failed; the last: ${describeOutcome(outcome)}` };
  }
  // Retry-After may push the next attempt later than the backoff, never earlier.
  const retryAfter = parseRetryAfter(outcome.retryAfter, now);
  return { kind: 'retry', at: now + Math.max(backoff, retryAfter ?? 0) };
}

export function describeOutcome(outcome: AttemptOutcome): string {
  if (outcome.statusCode !== null) return `HTTP ${outcome.statusCode}`;
  return outcome.error ?? 'no response';
}
