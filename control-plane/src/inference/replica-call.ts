// Runs one request against a replica the router picks, trying another replica when the
// first one fails before it produced anything (unreachable, 5xx): a killed replica costs
// the client nothing but a little latency. Request errors (4xx) are not retried; a
// replica failure that is not retried becomes 503 pool_degraded.
import { ApiError } from '@svc/shared';
import type { Lease, RouteRequest, Router } from './router.js';
import { ReplicaFailure } from './upstream.js';

export interface ReplicaCallResult<T> {
  value: T;
  /** Still held: release it once the response (a stream, say) is finished. */
  lease: Lease;
}

/** Hears each replica failure (the client is told less: replica addresses stay internal). */
export type FailureListener = (replica: Lease['replica'], err: Error) => void;

export async function callReplica<T>(
  router: Router,
  route: RouteRequest,
  attempts: number,
  run: (lease: Lease) => Promise<T>,
  onFailure?: FailureListener,
): Promise<ReplicaCallResult<T>> {
  const exclude = new Set<string>(route.exclude ?? []);
  let lastFailed: Lease['replica'] | undefined;
  for (let attempt = 1; ; attempt++) {
    let lease: Lease;
    try {
      lease = router.route({ ...route, exclude });
    } catch (refusal) {
      // Every replica left has failed this request: that, not capacity, is the answer.
      if (lastFailed) throw degraded(lastFailed, 'failed');
      throw refusal; // no_capacity, pool_degraded, rate_limited, as the router says
    }
    try {
      return { value: await run(lease), lease };
    } catch (err) {
      if (err instanceof ReplicaFailure) {
        lease.release(err.blame === 'replica' ? 'failed' : 'suspect');
        exclude.add(lease.replica.id);
        onFailure?.(lease.replica, err);
        lastFailed = lease.replica;
        if (!err.started && attempt < attempts) continue;
        throw degraded(lease.replica, err.started ? 'did not answer in time' : 'failed');
      } else {
        lease.release('ok');
      }
      throw err;
    }
  }
}

function degraded(replica: Lease['replica'], why: string): ApiError {
  return new ApiError('pool_degraded', `the model server in pool ${replica.pool} ${why}; retry, or pin another pool with X-Service-Pool`);
}
