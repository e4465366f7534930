// PostgreSQL implementation of the operator store (operator keys, the audit trail); rows
// read through the SQLite store's mappers, as the other PostgreSQL stores do.
import type pg from 'pg';
import type { AuditRecord, OperatorKeyRecord, OperatorStore } from '../operator-store.js';
import { toAudit, toKey } from '../sqlite/operator-store.js';
import { all, one, run } from './pg-pool.js';

export class PgOperatorStore implements OperatorStore {
  constructor(private readonly pool: pg.Pool) {}

  async createKey(key: OperatorKeyRecord, hash: Buffer): Promise<void> {
    await run(this.pool, 'INSERT INTO operator_keys (id, name, scopes, hash, last4, created_at, created_by, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)', [
      key.id,
      key.name,
      JSON.stringify(key.scopes),
      hash,
      key.last4,
      key.createdAt,
      key.createdBy,
      key.revokedAt,
    ]);
  }

  async getKey(id: string): Promise<OperatorKeyRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM operator_keys WHERE id = $1', [id]);
    return row && toKey(row);
  }

  async listKeys(): Promise<OperatorKeyRecord[]> {
    return (await all(this.pool, 'SELECT * FROM operator_keys ORDER BY created_at, id')).map(toKey);
  }

  async findKeyByHash(hash: Buffer): Promise<{ key: OperatorKeyRecord; hash: Buffer } | undefined> {
    const row = await one(this.pool, 'SELECT * FROM operator_keys WHERE hash = $1', [hash]);
    return row && { key: toKey(row), hash: row.hash as Buffer };
  }

  async revokeKey(id: string, at: number): Promise<OperatorKeyRecord | undefined> {
    await run(this.pool, 'UPDATE operator_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [at, id]);
    return this.getKey(id);
  }

  async appendAudit(entry: Omit<AuditRecord, 'seq'>): Promise<AuditRecord> {
    const row = await one(this.pool, 'INSERT INTO operator_audit (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5) RETURNING seq', [
      entry.at,
      entry.actor,
      entry.action,
      entry.target,
      JSON.stringify(entry.detail),
    ]);
    return { seq: Number(row!.seq), ...entry };
  }

  async listAudit(limit: number): Promise<AuditRecord[]> {
    return (await all(this.pool, 'SELECT * FROM operator_audit ORDER BY seq DESC LIMIT $1', [limit])).map(toAudit);
  }
}
