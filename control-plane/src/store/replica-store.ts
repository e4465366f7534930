// The part of the store that keeps model-server replicas. A replica is inserted with its
// GPU claims (gpu_claims, owner = replica id) in one transaction, and every change is a
// compare-and-set on the status, so the reconciler and agent reports never overwrite each
// other; a final status releases the claims in the same transaction.
import type { ReplicaRecord } from '../replicas/replica-record.js';
import type { ReplicaStatus } from '../replicas/replica-status.js';

export type ReplicaPatch = Partial<Omit<ReplicaRecord, 'id' | 'model' | 'quantization' | 'pool' | 'nodeId' | 'gpuUuids' | 'createdAt'>> & {
  changedAt: number;
};

export interface ReplicaStore {
  /** Inserts the replica and claims its GPUs; throws GpuAlreadyClaimed when one is taken. */
  create(replica: ReplicaRecord): Promise<void>;
  get(id: string): Promise<ReplicaRecord | undefined>;
  /** Replicas not yet stopped or lost, oldest first. */
  listActive(): Promise<ReplicaRecord[]>;
  /** Newest first; ended replicas only when asked. */
  list(options: { includeEnded: boolean; limit: number }): Promise<ReplicaRecord[]>;
  /**
   * Applies `patch` if the replica's status is still `expected`; returns the updated
   * record, or undefined when it changed meanwhile (or does not exist).
   */
  update(id: string, expected: ReplicaStatus, patch: ReplicaPatch): Promise<ReplicaRecord | undefined>;
}
