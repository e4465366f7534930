// The reconnect delay of the agent's one reconnect loop: exponential from 100 ms, capped
// low (SVC_AGENT_RECONNECT_MAX_MS, 1 s by default) so an agent is back within about a
// second of a network heal or a control-plane restart, with "full jitter" (a random delay
// between zero and the exponential step), so a thousand agents cut off by one restart
// spread over the whole step instead of coming back in lockstep.
// Pure: the random source is injected.

export interface BackoffPolicy {
  initialMs: number;
  maxMs: number;
  multiplier: number;
}

export const DEFAULT_RECONNECT_MAX_MS = 1_000;
export const RECONNECT_BACKOFF: BackoffPolicy = { initialMs: 100, maxMs: DEFAULT_RECONNECT_MAX_MS, multiplier: 2 };

/** The delay before retry number `attempt` (0 for the first retry): uniform in [0, step]. */
export function backoffDelay(attempt: number, policy: BackoffPolicy = RECONNECT_BACKOFF, random: () => number = Math.random): number {
  const step = Math.min(policy.maxMs, policy.initialMs * policy.multiplier ** Math.max(0, attempt));
  return Math.round(random() * step);
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
