// The reconnect delay of the agent's one reconnect loop: exponential from 100 ms to 10 s
// with "full jitter" (a random delay between half and all of the exponential step), so a
// thousand agents cut off by one control plane restart do not come back in lockstep.
// Pure: the random source is injected.

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
  multiplier: number;
}

export const RECONNECT_BACKOFF: BackoffPolicy = { initialMs: 100, maxMs: 10_000, multiplier: 2 };

/** The delay before retry number `attempt` (0 for the first retry). */
export function backoffDelay(attempt: number, policy: BackoffPolicy = RECONNECT_BACKOFF, random: () => number = Math.random): number {
  const step = Math.min(policy.maxMs, policy.initialMs * policy.multiplier ** Math.max(0, attempt));
  return Math.round(step / 2 + (random() * step) / 2);
}

/** Attempt counter that a healthy session resets. */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly policy: BackoffPolicy = RECONNECT_BACKOFF,
    private readonly random: () => number = Math.random,
  ) {}

  next(): number {
    return backoffDelay(this.attempt++, this.policy, this.random);
  }

  reset(): void {
    this.attempt = 0;
  }
}
