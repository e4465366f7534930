// SQLite implementation of the replica store.
import { CLAIM_GPU, claimParams } from './gpu-claim.js';
import type Database from 'better-sqlite3';
import type { ReplicaRecord } from '../../replicas/replica-record.js';
import { TERMINAL_REPLICA_STATUSES, type ReplicaStatus } from '../../replicas/replica-status.js';
import { GpuAlreadyClaimed } from '../instance-store.js';
import type { ReplicaPatch, ReplicaStore } from '../replica-store.js';

type Row = Record<string, unknown>;

const COLUMNS: Record<keyof ReplicaRecord, string> = {
  id: 'id',
  model: 'model',
  quantization: 'quantization',
  pool: 'pool',
  nodeId: 'node_id',
  gpuUuids: 'gpu_uuids',
  engine: 'engine',
  image: 'image',
  args: 'args',
  env: 'env',
  containerPort: 'container_port',
  healthPath: 'health_path',
  status: 'status',
  endpoint: 'endpoint',
  message: 'message',
  restarts: 'restarts',
  createdAt: 'created_at',
  readyAt: 'ready_at',
  changedAt: 'changed_at',
  endedAt: 'ended_at',
};
const JSON_FIELDS = new Set<keyof ReplicaRecord>(['gpuUuids', 'args', 'env']);

export function toColumns(record: Partial<ReplicaRecord>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(record) as Array<[keyof ReplicaRecord, unknown]>) {
    out[COLUMNS[field]] = JSON_FIELDS.has(field) ? JSON.stringify(value) : value;
  }
  return out;
}

export function toRecord(row: Row): ReplicaRecord {
  const out: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(COLUMNS) as Array<[keyof ReplicaRecord, string]>) {
    const value = row[column];
    out[field] = JSON_FIELDS.has(field) ? JSON.parse(String(value)) : value;
  }
  return out as unknown as ReplicaRecord;
}

export class SqliteReplicaStore implements ReplicaStore {
  constructor(private readonly db: Database.Database) {}

  private getSync(id: string): ReplicaRecord | undefined {
    const row = this.db.prepare('SELECT * FROM replicas WHERE id = ?').get(id) as Row | undefined;
    return row && toRecord(row);
  }

  async create(replica: ReplicaRecord): Promise<void> {
    this.db.transaction(() => {
      // gpu_claims' primary key: an instance and a replica (or two replicas) never share a GPU.
      const claim = this.db.prepare(CLAIM_GPU);
      for (const uuid of replica.gpuUuids) {
        if (claim.run(claimParams(uuid, replica.nodeId, replica.id, replica.createdAt)).changes === 0) throw new GpuAlreadyClaimed(uuid);
      }
      const columns = toColumns(replica);
      const names = Object.keys(columns);
      this.db.prepare(`INSERT INTO replicas (${names.join(', ')}) VALUES (${names.map((n) => `@${n}`).join(', ')})`).run(columns);
    }).immediate();
  }

  async get(id: string): Promise<ReplicaRecord | undefined> {
    return this.getSync(id);
  }

  async listActive(): Promise<ReplicaRecord[]> {
    return (this.db.prepare('SELECT * FROM replicas WHERE ended_at IS NULL ORDER BY created_at, id').all() as Row[]).map(toRecord);
  }

  async list(options: { includeEnded: boolean; limit: number }): Promise<ReplicaRecord[]> {
    const where = options.includeEnded ? '' : 'WHERE ended_at IS NULL';
    const rows = this.db.prepare(`SELECT * FROM replicas ${where} ORDER BY created_at DESC, id DESC LIMIT ?`).all(options.limit) as Row[];
    return rows.map(toRecord);
  }

  async update(id: string, expected: ReplicaStatus, patch: ReplicaPatch): Promise<ReplicaRecord | undefined> {
    return this.db.transaction(() => {
      const columns = toColumns(patch);
      const sets = Object.keys(columns).map((c) => `${c} = @${c}`).join(', ');
      const changed = this.db.prepare(`UPDATE replicas SET ${sets} WHERE id = @__id AND status = @__expected`).run({ ...columns, __id: id, __expected: expected });
      if (changed.changes === 0) return undefined;
      if (patch.status && TERMINAL_REPLICA_STATUSES.has(patch.status)) this.db.prepare('DELETE FROM gpu_claims WHERE owner = ?').run(id);
      return this.getSync(id);
    }).immediate();
  }
}
