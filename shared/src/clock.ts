// Time comes from an injectable clock so expiry, rotation windows and billing are tested
// without sleeping.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to; for tests. */
export class ManualClock implements Clock {
  constructor(private current = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

export const toUnixSeconds = (ms: number): number => Math.floor(ms / 1000);
export const toRfc3339 = (ms: number): string => new Date(ms).toISOString();
