// How many bytes of JSON Schema an organization may have the control plane check for the
// first time, per minute. A schema's checks (meta-schema, limits, for grammar engines the
// ambiguity and a value it must allow) cost the control plane's CPU in proportion to its
// size: 440 KB of tools took 15-75 ms a request. Verdicts are cached by the schema's digest
// (response-format.ts), so the schemas a client sends again cost nothing and are not
// counted; a tenant varying a name in every request missed the cache each time, and one key
// could keep a core busy. Per process (each replica of the control plane its own budget).
import { ApiError } from '@svc/shared/errors';
import type { Clock } from '@svc/shared';

/** Told the size of a schema about to be checked for the first time; throws to refuse it. */
export type SchemaMeter = (bytes: number) => void;

/** Buckets kept before the full ones (idle organizations) are dropped. */
const MAX_BUCKETS = 10_000;

export class SchemaBudget {
  private readonly buckets = new Map<string, { bytes: number; at: number }>();

  constructor(
    private readonly bytesPerMinute: number,
    private readonly clock: Clock,
  ) {}

  /** The meter of `orgId`'s requests: a bucket of `bytesPerMinute`, refilled continuously. */
  meterFor(orgId: string): SchemaMeter {
    return (bytes) => this.charge(orgId, bytes);
  }

  private charge(orgId: string, bytes: number): void {
    const now = this.clock.now();
    const bucket = this.buckets.get(orgId) ?? { bytes: this.bytesPerMinute, at: now };
    bucket.bytes = Math.min(this.bytesPerMinute, bucket.bytes + ((now - bucket.at) * this.bytesPerMinute) / 60_000);
    bucket.at = now;
    if (bytes > bucket.bytes) {
      const waitS = Math.max(1, Math.ceil(((bytes - bucket.bytes) * 60) / this.bytesPerMinute));
      this.buckets.set(orgId, bucket);
      throw new ApiError(
        'rate_limited',
        `this organization sent more than ${this.bytesPerMinute} bytes of JSON Schema new to the service in a minute (schemas sent again are not counted); retry in ${waitS} s`,
        { code: 'schema_budget', headers: { 'retry-after': String(waitS) } },
      );
    }
    bucket.bytes -= bytes;
    this.buckets.set(orgId, bucket);
    if (this.buckets.size > MAX_BUCKETS) this.dropFull(now);
  }

  /** Forgets organizations whose bucket has refilled (they are as new ones). */
  private dropFull(now: number): void {
    for (const [orgId, bucket] of this.buckets) {
      if (bucket.bytes + ((now - bucket.at) * this.bytesPerMinute) / 60_000 >= this.bytesPerMinute) this.buckets.delete(orgId);
    }
  }
}
