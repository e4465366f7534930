// PostgreSQL implementation of the stored-responses store: single statements, so no
// transaction is needed; an expired row reads as absent before it is purged.
import type pg from 'pg';
import type { ResponseStore, StoredResponseRecord } from '../response-store.js';
import { toStoredResponse } from '../sqlite/response-store.js';
import { one, run } from './pg-pool.js';

export class PgResponseStore implements ResponseStore {
  constructor(private readonly pool: pg.Pool) {}

  async put(r: StoredResponseRecord): Promise<void> {
    await run(this.pool, 'INSERT INTO stored_responses (id, org_id, response, history, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)', [
      r.id,
      r.orgId,
      JSON.stringify(r.response),
      JSON.stringify(r.history),
      r.createdAt,
      r.expiresAt,
    ]);
  }

  async get(orgId: string, id: string, now: number): Promise<StoredResponseRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM stored_responses WHERE id = $1 AND org_id = $2 AND expires_at > $3', [id, orgId, now]);
    return row && toStoredResponse(row);
  }

  async getResponse(orgId: string, id: string, now: number): Promise<Record<string, unknown> | undefined> {
    const row = await one(this.pool, 'SELECT response FROM stored_responses WHERE id = $1 AND org_id = $2 AND expires_at > $3', [id, orgId, now]);
    return row && (JSON.parse(String(row.response)) as Record<string, unknown>);
  }

  async delete(orgId: string, id: string, now: number): Promise<boolean> {
    return (await run(this.pool, 'DELETE FROM stored_responses WHERE id = $1 AND org_id = $2 AND expires_at > $3', [id, orgId, now])) > 0;
  }

  async purgeExpired(now: number): Promise<number> {
    return run(this.pool, 'DELETE FROM stored_responses WHERE expires_at <= $1', [now]);
  }
}
