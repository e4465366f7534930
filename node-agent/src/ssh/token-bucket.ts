// A token bucket in bytes: the rate a stream may average, with a burst it may send at once.
// Spending may go into debt; the answer is how long the stream should wait for the debt to
// be paid back. Pure but for the clock, which tests pass in.

export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    /** Bytes per second. */
    private readonly rate: number,
    /** Bytes the bucket holds when full. */
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burst;
    this.at = now();
  }

  /** Spends `bytes`; the milliseconds until the bucket is out of debt again (0: not in debt). */
  take(bytes: number): number {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.at) * this.rate) / 1000) - bytes;
    this.at = t;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.rate);
  }
}

/** The buckets of a link of `mbps` Mbit/s each way: 50 ms of it at once, at least 256 KiB. */
export function linkBuckets(mbps: number, now?: () => number): { in: TokenBucket; out: TokenBucket } {
  const rate = mbps * 125_000;
  const burst = Math.max(256 * 1024, rate / 20);
  return { in: new TokenBucket(rate, burst, now), out: new TokenBucket(rate, burst, now) };
}
