// SQLite implementation of the user store.
import type Database from 'better-sqlite3';
import type { ApiKeyRecord, EventRecord } from '../records.js';
import type { UserRecord, UserRemoval, UserRole, UserStatus, UserStore } from '../user-store.js';
import { insertEvent } from './event-rows.js';
import { toKey } from './sqlite-store.js';

type Row = Record<string, unknown>;

export function toUser(row: Row): UserRecord {
  return {
    id: String(row.id),
    orgId: String(row.org_id),
    email: String(row.email),
    role: String(row.role) as UserRole,
    status: String(row.status) as UserStatus,
    invitedBy: row.invited_by === null ? null : String(row.invited_by),
    createdAt: Number(row.created_at),
  };
}

export class SqliteUserStore implements UserStore {
  constructor(private readonly db: Database.Database) {}

  async invite(user: UserRecord, event: EventRecord): Promise<boolean> {
    return this.db.transaction(() => {
      const inserted = this.db
        .prepare(
          `INSERT INTO org_users (id, org_id, email, role, status, invited_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (org_id, email) DO NOTHING`,
        )
        .run(user.id, user.orgId, user.email, user.role, user.status, user.invitedBy, user.createdAt);
      if (inserted.changes === 0) return false;
      insertEvent(this.db, event);
      return true;
    })();
  }

  async get(id: string): Promise<UserRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM org_users WHERE id = ?').get(id) as Row | undefined;
    return row && toUser(row);
  }

  async list(orgId: string): Promise<UserRecord[]> {
    return (this.db.prepare('SELECT * FROM org_users WHERE org_id = ? ORDER BY created_at, id').all(orgId) as Row[]).map(toUser);
  }

  async setRole(id: string, role: UserRole, covers?: (liveKeys: ApiKeyRecord[]) => void): Promise<UserRecord | undefined> {
    return this.db.transaction(() => {
      if (!this.db.prepare('SELECT 1 FROM org_users WHERE id = ?').get(id)) return undefined;
      if (covers) covers((this.db.prepare('SELECT * FROM api_keys WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at, id').all(id) as Row[]).map(toKey));
      const row = this.db.prepare('UPDATE org_users SET role = ? WHERE id = ? RETURNING *').get(role, id) as Row | undefined;
      return row && toUser(row);
    }).immediate();
  }

  async remove(id: string, at: number, keyEvent: (key: ApiKeyRecord) => EventRecord, event: EventRecord): Promise<UserRemoval | undefined> {
    return this.db.transaction(() => {
      const row = this.db.prepare('SELECT * FROM org_users WHERE id = ?').get(id) as Row | undefined;
      if (!row) return undefined;
      const keys = (this.db.prepare('SELECT * FROM api_keys WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at, id').all(id) as Row[]).map(toKey);
      const revoke = this.db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?');
      const revokedKeys = keys.map((key) => {
        revoke.run(at, key.id);
        insertEvent(this.db, keyEvent(key));
        return { ...key, revokedAt: at };
      });
      this.db.prepare('DELETE FROM org_users WHERE id = ?').run(id);
      insertEvent(this.db, event);
      return { user: toUser(row), revokedKeys };
    })();
  }
}
