// How often one instance's SSH and SFTP may call on the Docker engine. Each session's
// process is a Docker exec, and each SFTP stat, listing, upload or download an exec or an
// archive call; each costs dockerd, containerd and runc the host's CPU, outside the
// instance's quota (measured: about 40 ms of host CPU per exec of `true`, 0.1 ms of it
// charged to the container). Unpaced, a tenant opening sessions or listing a directory in a
// loop would keep host cores busy for free. Past the rate, calls wait their turn (as the
// log limiter makes a command's writes wait): clients slow down, none is refused.
import { TokenBucket } from './token-bucket.js';

/**
 * What each kind of call counts for: starting a process costs runc a process of its own
 * on top of the engine's work (about 40 ms of host CPU for `true`, against a few for an
 * archive call that stats or streams a path).
 */
export const ENGINE_CALL_COST = { archive: 1, exec: 8 } as const;
export type EngineCallKind = keyof typeof ENGINE_CALL_COST;

/** Seconds of the rate an instance may use at once. */
export const ENGINE_BURST_SECONDS = 4;

/** Idle instances are forgotten once this many are known (their buckets are full again anyway). */
const SWEEP_ABOVE = 256;

export class EnginePacer {
  /** `clearAt`: when its last call goes out (its debt is paid); full again a burst's time after. */
  private readonly buckets = new Map<string, { bucket: TokenBucket; clearAt: number }>();

  constructor(
    /** Calls a second each instance may average; 0: not paced. */
    private readonly perSecond: number,
    /** Calls it may make at once. */
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Resolves once `instanceId` may make one more engine call of `cost`; calls past the rate wait in turn. */
  async pace(instanceId: string, cost = 1): Promise<void> {
    const wait = this.delayFor(instanceId, cost);
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /** Milliseconds the next call of `instanceId` must wait (and takes its turn). */
  delayFor(instanceId: string, cost = 1): number {
    if (this.perSecond <= 0) return 0;
    const now = this.now();
    let held = this.buckets.get(instanceId);
    if (!held) {
      if (this.buckets.size >= SWEEP_ABOVE) this.sweep(now);
      held = { bucket: new TokenBucket(this.perSecond, this.burst, this.now), clearAt: now };
      this.buckets.set(instanceId, held);
    }
    const wait = held.bucket.take(cost);
    held.clearAt = now + wait;
    return wait;
  }

  private sweep(now: number): void {
    const refilledMs = (this.burst / this.perSecond) * 1000;
    for (const [id, held] of this.buckets) if (now - held.clearAt > refilledMs) this.buckets.delete(id);
  }
}
