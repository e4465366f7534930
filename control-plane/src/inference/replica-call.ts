// Runs one request against a replica the router picks, trying another replica when the
// first one fails before it produced anything (unreachable, 5xx): a killed replica costs
// the client nothing but a little latency. Request errors (4xx) are not retried.
import type { Lease, RouteRequest, Router } from './router.js';
import { ReplicaFailure } from './upstream.js';

export interface ReplicaCallResult<T> {
  value: T;
  /** Still held: release it once the response (a stream, say) is finished. */
  lease: Lease;
}

export async function callReplica<T>(
  router: Router,
  route: RouteRequest,
  attempts: number,
  run: (lease: Lease) => Promise<T>,
): Promise<ReplicaCallResult<T>> {
  const exclude = new Set<string>(route.exclude ?? []);
  for (let attempt = 1; ; attempt++) {
    // Throws the router's refusal (no_capacity, pool_degraded) once no replica is left.
    const lease = router.route({ ...route, exclude });
    try {
      return { value: await run(lease), lease };
    } catch (err) {
      if (err instanceof ReplicaFailure) {
        lease.release('failed');
        exclude.add(lease.replica.id);
        if (!err.started && attempt < attempts) continue;
      } else {
        lease.release('ok');
      }
      throw err;
    }
  }
}
