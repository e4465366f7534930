// SQLite implementation of the stored-responses store; statements prepared once.
import type Database from 'better-sqlite3';
import type { ResponseStore, StoredResponseRecord } from '../response-store.js';

type Row = Record<string, unknown>;

/** A stored_responses row as a record; PostgreSQL's store reads the same columns. */
export const toStoredResponse = (row: Row): StoredResponseRecord => ({
  id: String(row.id),
  orgId: String(row.org_id),
  response: JSON.parse(String(row.response)) as Record<string, unknown>,
  history: JSON.parse(String(row.history)) as unknown[],
  createdAt: Number(row.created_at),
  expiresAt: Number(row.expires_at),
});

export class SqliteResponseStore implements ResponseStore {
  private readonly insert: Database.Statement;
  private readonly select: Database.Statement;
  private readonly selectResponse: Database.Statement;
  private readonly remove: Database.Statement;
  private readonly purge: Database.Statement;

  constructor(db: Database.Database) {
    this.insert = db.prepare(
      `INSERT INTO stored_responses (id, org_id, response, history, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
    );
    this.select = db.prepare('SELECT * FROM stored_responses WHERE id = ? AND org_id = ? AND expires_at > ?');
    this.selectResponse = db.prepare('SELECT response FROM stored_responses WHERE id = ? AND org_id = ? AND expires_at > ?');
    this.remove = db.prepare('DELETE FROM stored_responses WHERE id = ? AND org_id = ? AND expires_at > ?');
    this.purge = db.prepare('DELETE FROM stored_responses WHERE expires_at <= ?');
  }

  async put(r: StoredResponseRecord): Promise<void> {
    this.insert.run(r.id, r.orgId, JSON.stringify(r.response), JSON.stringify(r.history), r.createdAt, r.expiresAt);
  }

  async get(orgId: string, id: string, now: number): Promise<StoredResponseRecord | undefined> {
    const row = this.select.get(id, orgId, now) as Row | undefined;
    return row && toStoredResponse(row);
  }

  async getResponse(orgId: string, id: string, now: number): Promise<Record<string, unknown> | undefined> {
    const row = this.selectResponse.get(id, orgId, now) as Row | undefined;
    return row && (JSON.parse(String(row.response)) as Record<string, unknown>);
  }

  async delete(orgId: string, id: string, now: number): Promise<boolean> {
    return this.remove.run(id, orgId, now).changes > 0;
  }

  async purgeExpired(now: number): Promise<number> {
    return this.purge.run(now).changes;
  }
}
