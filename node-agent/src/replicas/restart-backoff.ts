// How long a replica waits before the agent restarts it: 1 s, doubling to at most 60 s,
// back to 1 s once a replica stayed healthy for a stable period (a server that crashes
// once a day restarts at once; one that crashes on start does not spin). No jitter: one
// node's replicas rarely crash together, and tests read the exact delays. Pure.

export interface RestartPolicy {
  initialMs: number;
  maxMs: number;
  multiplier: number;
  /** Healthy at least this long before it ended: the next restart is a first restart again. */
  stableMs: number;
}

export const REPLICA_RESTART_POLICY: RestartPolicy = { initialMs: 1_000, maxMs: 60_000, multiplier: 2, stableMs: 120_000 };

/** The delay before restart number `attempt` (0 for the first). */
export function restartDelayMs(attempt: number, policy: RestartPolicy = REPLICA_RESTART_POLICY): number {
  return Math.min(policy.maxMs, policy.initialMs * policy.multiplier ** Math.max(0, attempt));
}

export class RestartBackoff {
  private attempt = 0;

  constructor(private readonly policy: RestartPolicy = REPLICA_RESTART_POLICY) {}

  /** The delay before the next restart, given how long the replica had been healthy (0 if never). */
  next(healthyForMs: number): number {
    if (healthyForMs >= this.policy.stableMs) this.attempt = 0;
    return restartDelayMs(this.attempt++, this.policy);
  }
}
