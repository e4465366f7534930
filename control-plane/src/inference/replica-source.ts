// What the inference router needs to know about model-server replicas: the live ones
// (the replica directory: running and passing their health checks, as agents report
// them) and where replicas are meant to run (the serving plan, from configuration),
// which tells "not served in this pool" (404) apart from "served here but degraded" (503).
import type { Pool, Quantization } from '../models/catalog.js';
import type { DesiredReplica } from '../replicas/desired.js';

export type { LiveReplica, ReplicaDirectory } from '../replicas/replica-directory.js';

export interface ServingPlan {
  /** Replicas wanted for (model, quantization) in `pool`; 0 when none are configured. */
  desired(model: string, quantization: Quantization, pool: Pool): number;
}

export function servingPlan(desired: readonly DesiredReplica[]): ServingPlan {
  const counts = new Map(desired.map((d) => [`${d.model}\0${d.quantization}\0${d.pool}`, d.count]));
  return { desired: (model, quantization, pool) => counts.get(`${model}\0${quantization}\0${pool}`) ?? 0 };
}
