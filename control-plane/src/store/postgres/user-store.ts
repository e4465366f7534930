// PostgreSQL implementation of the user store.
import type pg from 'pg';
import type { ApiKeyRecord, EventRecord } from '../records.js';
import type { UserRecord, UserRemoval, UserRole, UserStore } from '../user-store.js';
import { toKey } from '../sqlite/sqlite-store.js';
import { toUser } from '../sqlite/user-store.js';
import { insertEvent } from './event-rows.js';
import { all, inTransaction, one, run } from './pg-pool.js';

export class PgUserStore implements UserStore {
  constructor(private readonly pool: pg.Pool) {}

  async invite(user: UserRecord, event: EventRecord): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      const inserted = await one(
        client,
        `INSERT INTO org_users (id, org_id, email, role, status, invited_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (org_id, email) DO NOTHING RETURNING id`,
        [user.id, user.orgId, user.email, user.role, user.status, user.invitedBy, user.createdAt],
      );
      if (!inserted) return false;
      await insertEvent(client, event);
      return true;
    });
  }

  async get(id: string): Promise<UserRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM org_users WHERE id = $1', [id]);
    return row && toUser(row);
  }

  async list(orgId: string): Promise<UserRecord[]> {
    return (await all(this.pool, 'SELECT * FROM org_users WHERE org_id = $1 ORDER BY created_at, id', [orgId])).map(toUser);
  }

  async setRole(id: string, role: UserRole, covers?: (liveKeys: ApiKeyRecord[]) => void): Promise<UserRecord | undefined> {
    return inTransaction(this.pool, async (client) => {
      // The row lock waits for a key being made for this user (it holds the row FOR SHARE),
      // so the keys read next include it; a key made after waits for the new role.
      if (!(await one(client, 'SELECT 1 FROM org_users WHERE id = $1 FOR UPDATE', [id]))) return undefined;
      if (covers) covers((await all(client, 'SELECT * FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL ORDER BY created_at, id', [id])).map(toKey));
      const row = await one(client, 'UPDATE org_users SET role = $1 WHERE id = $2 RETURNING *', [role, id]);
      return row && toUser(row);
    });
  }

  async remove(id: string, at: number, keyEvent: (key: ApiKeyRecord) => EventRecord, event: EventRecord): Promise<UserRemoval | undefined> {
    return inTransaction(this.pool, async (client) => {
      // Deleting first locks the user row: a concurrent removal waits, then finds nothing.
      const row = await one(client, 'DELETE FROM org_users WHERE id = $1 RETURNING *', [id]);
      if (!row) return undefined;
      const keys = (await all(client, 'SELECT * FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL ORDER BY created_at, id FOR UPDATE', [id])).map(toKey);
      const revokedKeys: ApiKeyRecord[] = [];
      for (const key of keys) {
        await run(client, 'UPDATE api_keys SET revoked_at = $1 WHERE id = $2', [at, key.id]);
        await insertEvent(client, keyEvent(key));
        revokedKeys.push({ ...key, revokedAt: at });
      }
      await insertEvent(client, event);
      return { user: toUser(row), revokedKeys };
    });
  }
}
