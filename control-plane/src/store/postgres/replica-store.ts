// PostgreSQL implementation of the replica store: the insert claims its GPUs in the
// same transaction, every change is a compare-and-set on the status.
import type pg from 'pg';
import type { ReplicaRecord } from '../../replicas/replica-record.js';
import { TERMINAL_REPLICA_STATUSES, type ReplicaStatus } from '../../replicas/replica-status.js';
import type { ReplicaPatch, ReplicaStore } from '../replica-store.js';
import { toColumns, toRecord } from '../sqlite/replica-store.js';
import { assignments, claimAll, insertRow } from './instance-store.js';
import { all, inTransaction, one, run, type Queryable } from './pg-pool.js';

export class PgReplicaStore implements ReplicaStore {
  constructor(private readonly pool: pg.Pool) {}

  private async getOn(db: Queryable, id: string): Promise<ReplicaRecord | undefined> {
    const row = await one(db, 'SELECT * FROM replicas WHERE id = $1', [id]);
    return row && toRecord(row);
  }

  async create(replica: ReplicaRecord): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      // gpu_claims' primary key: an instance and a replica (or two replicas) never share a GPU.
      await claimAll(client, replica.nodeId, replica.gpuUuids, replica.id, replica.createdAt);
      await insertRow(client, 'replicas', toColumns(replica));
    });
  }

  async get(id: string): Promise<ReplicaRecord | undefined> {
    return this.getOn(this.pool, id);
  }

  async listActive(): Promise<ReplicaRecord[]> {
    return (await all(this.pool, 'SELECT * FROM replicas WHERE ended_at IS NULL ORDER BY created_at, id')).map(toRecord);
  }

  async list(options: { includeEnded: boolean; limit: number }): Promise<ReplicaRecord[]> {
    const where = options.includeEnded ? '' : 'WHERE ended_at IS NULL';
    return (await all(this.pool, `SELECT * FROM replicas ${where} ORDER BY created_at DESC, id DESC LIMIT $1`, [options.limit])).map(toRecord);
  }

  async update(id: string, expected: ReplicaStatus, patch: ReplicaPatch): Promise<ReplicaRecord | undefined> {
    return inTransaction(this.pool, async (client) => {
      const { sets, values } = assignments(toColumns(patch), 3);
      const changed = await run(client, `UPDATE replicas SET ${sets} WHERE id = $1 AND status = $2`, [id, expected, ...values]);
      if (changed === 0) return undefined;
      if (patch.status && TERMINAL_REPLICA_STATUSES.has(patch.status)) await run(client, 'DELETE FROM gpu_claims WHERE owner = $1', [id]);
      return this.getOn(client, id);
    });
  }
}
