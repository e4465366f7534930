// How often one instance may make the node agent do work that costs the host's CPU outside
// the instance's quota, paced per instance: past the rate, calls wait their turn (as the
// log limiter makes a command's writes wait), so clients slow down and none is refused.
// - Docker engine calls of its SSH and SFTP: each session's process is a Docker exec, each
//   terminal resize an engine call, and each SFTP stat, listing, upload or download an
//   exec or an archive call; each costs dockerd, containerd and runc the host's CPU
//   (measured: about 40 ms of host CPU per exec of `true`, 0.1 ms of it charged to the
//   container; 0.6 ms a resize). Unpaced, a tenant opening sessions or listing a directory
//   in a loop kept host cores busy for free.
// - SSH logins: each is a key exchange and a signature check on the agent's one thread
//   (measured: about 3 ms a login through ssh2, client setup included); unpaced, a tenant
//   logging in and out in a loop from a few machines could keep that thread busy.
// - requests through its Jupyter port: each costs the agent's one thread (measured: 378 us a
//   request; one client with 32 connections, against a tenant's own fast server on the
//   Jupyter port, kept the agent at 95% of a core, which every tenant's SSH and Jupyter and
//   the agent's control stream share).
import { TokenBucket } from './token-bucket.js';

/**
 * What each kind of call counts for: starting a process costs runc a process of its own
 * on top of the engine's work (about 40 ms of host CPU for `true`, against a few for an
 * archive call that stats or streams a path). A login is the agent's own work: at the
 * default rate, 10 a second, 40 at once (an Ansible run's forks).
 */
export const ENGINE_CALL_COST = { archive: 1, resize: 1, exec: 8, login: 4 } as const;
export type EngineCallKind = keyof typeof ENGINE_CALL_COST;

/** Seconds of its rate an instance may use at once. */
export const PACE_BURST_SECONDS = 4;

/** Idle instances are forgotten once this many are known (their buckets are full again anyway). */
const SWEEP_ABOVE = 256;

export class InstancePacer {
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
