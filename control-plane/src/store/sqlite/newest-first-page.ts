// One page of a table, newest first, by keyset: (created_at, id) below the row named by
// `after`. Stable under inserts, unlike OFFSET. An `after` that is not one of the org's
// rows gives an empty page.
import type Database from 'better-sqlite3';

type Row = Record<string, unknown>;

export interface PageQuery {
  table: string;
  orgId: string;
  /** Extra conditions (SQL with named parameters) and their values. */
  where?: string[];
  params?: Record<string, unknown>;
  limit: number;
  after?: string | undefined;
}

export function newestFirstPage(db: Database.Database, query: PageQuery): { rows: Row[]; hasMore: boolean } {
  const where = ['org_id = @orgId', ...(query.where ?? [])];
  const params: Record<string, unknown> = { ...query.params, orgId: query.orgId, limit: query.limit + 1 };
  if (query.after) {
    const cursor = db.prepare(`SELECT created_at, id FROM ${query.table} WHERE id = ? AND org_id = ?`).get(query.after, query.orgId) as Row | undefined;
    if (!cursor) return { rows: [], hasMore: false };
    where.push('(created_at < @cAt OR (created_at = @cAt AND id < @cId))');
    params.cAt = cursor.created_at;
    params.cId = cursor.id;
  }
  const rows = db.prepare(`SELECT * FROM ${query.table} WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT @limit`).all(params) as Row[];
  return { rows: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
}
