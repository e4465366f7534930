// A value read at most once per `ttlMs`, however many ask: concurrent callers share one
// read in flight, later ones get the cached value until it is older than the TTL. The
// public status page is key-less, so this is what keeps it from being a way to load the
// store: any request rate costs one fleet read per TTL, whether the read succeeds or fails.
import type { Clock } from '@svc/shared';

export interface SnapshotCache<T> {
  get(): Promise<T>;
}

export function snapshotCache<T>(load: () => Promise<T>, ttlMs: number, clock: Pick<Clock, 'now'>): SnapshotCache<T> {
  // The last outcome: a value, or a failure, which is kept as long so that a store in
  // trouble is not asked again by every request either.
  let last: { at: number; ok: true; data: T } | { at: number; ok: false; error: unknown } | undefined;
  let inFlight: Promise<T> | undefined;
  return {
    get(): Promise<T> {
      if (last && clock.now() - last.at < ttlMs) return last.ok ? Promise.resolve(last.data) : Promise.reject(last.error);
      if (inFlight) return inFlight;
      const startedAt = clock.now();
      inFlight = load().then(
        (data) => {
          last = { at: startedAt, ok: true, data };
          inFlight = undefined;
          return data;
        },
        (error: unknown) => {
          last = { at: startedAt, ok: false, error };
          inFlight = undefined;
          throw error;
        },
      );
      return inFlight;
    },
  };
}
