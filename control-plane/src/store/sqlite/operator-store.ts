// SQLite implementation of the operator store.
import type Database from 'better-sqlite3';
import type { AuditRecord, OperatorKeyRecord, OperatorScope, OperatorStore } from '../operator-store.js';

type Row = Record<string, unknown>;

export function toKey(row: Row): OperatorKeyRecord {
  return {
    id: String(row.id),
    name: row.name === null ? null : String(row.name),
    scopes: JSON.parse(String(row.scopes)) as OperatorScope[],
    last4: String(row.last4),
    createdAt: Number(row.created_at),
    createdBy: String(row.created_by),
    revokedAt: row.revoked_at === null ? null : Number(row.revoked_at),
  };
}

export function toAudit(row: Row): AuditRecord {
  return {
    seq: Number(row.seq),
    at: Number(row.at),
    actor: String(row.actor),
    action: String(row.action),
    target: row.target === null ? null : String(row.target),
    detail: JSON.parse(String(row.detail)) as Record<string, unknown>,
  };
}

export class SqliteOperatorStore implements OperatorStore {
  constructor(private readonly db: Database.Database) {}

  async createKey(key: OperatorKeyRecord, hash: Buffer): Promise<void> {
    this.db
      .prepare('INSERT INTO operator_keys (id, name, scopes, hash, last4, created_at, created_by, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
      .run(key.id, key.name, JSON.stringify(key.scopes), hash, key.last4, key.createdAt, key.createdBy, key.revokedAt);
  }

  async getKey(id: string): Promise<OperatorKeyRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM operator_keys WHERE id = ?').get(id) as Row | undefined;
    return row && toKey(row);
  }

  async listKeys(): Promise<OperatorKeyRecord[]> {
    return (this.db.prepare('SELECT * FROM operator_keys ORDER BY created_at, id').all() as Row[]).map(toKey);
  }

  async findKeyByHash(hash: Buffer): Promise<{ key: OperatorKeyRecord; hash: Buffer } | undefined> {
    const row = this.db.prepare('SELECT * FROM operator_keys WHERE hash = ?').get(hash) as Row | undefined;
    return row && { key: toKey(row), hash: row.hash as Buffer };
  }

  async revokeKey(id: string, at: number): Promise<OperatorKeyRecord | undefined> {
    this.db.prepare('UPDATE operator_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(at, id);
    return this.getKey(id);
  }

  async appendAudit(entry: Omit<AuditRecord, 'seq'>): Promise<AuditRecord> {
    const result = this.db
      .prepare('INSERT INTO operator_audit (at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)')
      .run(entry.at, entry.actor, entry.action, entry.target, JSON.stringify(entry.detail));
    return { seq: Number(result.lastInsertRowid), ...entry };
  }

  async listAudit(limit: number): Promise<AuditRecord[]> {
    return (this.db.prepare('SELECT * FROM operator_audit ORDER BY seq DESC LIMIT ?').all(limit) as Row[]).map(toAudit);
  }
}
