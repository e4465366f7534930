// A token bucket in bytes: the rate a stream may average, with a burst it may send at once.
// Spending may go into debt; the answer is how long the stream should wait for the debt to
// be paid back. Pure but for the clock, which tests pass in.

export class TokenBucket {
  private tokens: number;
  private at: number;

  constructor(
    /** Bytes per second. */
    private rate: number,
    /** Bytes the bucket holds when full. */
    private burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burst;
    this.at = now();
  }

  /** Spends `bytes`; the milliseconds until the bucket is out of debt again (0: not in debt). */
  take(bytes: number): number {
    this.tokens = this.earned() - bytes;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.rate);
  }

  /** From now on: what was earned at the old rate is kept, up to the new burst. */
  setRate(rate: number, burst: number): void {
    this.tokens = Math.min(burst, this.earned());
    this.rate = rate;
    this.burst = burst;
  }

  private earned(): number {
    const t = this.now();
    const tokens = Math.min(this.burst, this.tokens + ((t - this.at) * this.rate) / 1000);
    this.at = t;
    return tokens;
  }
}

/** A link of `mbps` Mbit/s each way: 50 ms of it at once, at least 256 KiB. Its rate can change. */
export class LinkBuckets {
  readonly in: TokenBucket;
  readonly out: TokenBucket;

  constructor(
    private current: number,
    now?: () => number,
  ) {
    this.in = new TokenBucket(bytesPerSecond(current), burstOf(current), now);
    this.out = new TokenBucket(bytesPerSecond(current), burstOf(current), now);
  }

  get mbps(): number {
    return this.current;
  }

  set mbps(mbps: number) {
    if (mbps === this.current) return;
    this.current = mbps;
    for (const bucket of [this.in, this.out]) bucket.setRate(bytesPerSecond(mbps), burstOf(mbps));
  }
}

const bytesPerSecond = (mbps: number): number => mbps * 125_000;
const burstOf = (mbps: number): number => Math.max(256 * 1024, bytesPerSecond(mbps) / 20);

/**
 * A node-wide budget in Mbit/s each way that the instances using one path through the agent
 * (the SSH gateway, the Jupyter proxy) share equally: every byte through the agent costs its
 * one thread, so no tenant may take all of it. Each instance's connections share one pair
 * of buckets, made with its registration (a restarted instance gets new ones), at the
 * instance's own bandwidth or its share of the budget, whichever is less.
 */
export class LinkBudget {
  private readonly links = new WeakMap<object, LinkBuckets>();

  constructor(readonly nodeMbps: number) {}

  /** `registration`'s buckets at their current rate: `ownMbps` (null: none of its own) or the node's budget split `sharers` ways. */
  linkOf(registration: object, ownMbps: number | null, sharers: number): LinkBuckets {
    const mbps = Math.min(ownMbps || Infinity, this.nodeMbps / Math.max(1, sharers));
    let link = this.links.get(registration);
    if (!link) this.links.set(registration, (link = new LinkBuckets(mbps)));
    else link.mbps = mbps;
    return link;
  }
}
