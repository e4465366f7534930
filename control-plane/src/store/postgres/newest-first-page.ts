// One page of a table, newest first, by keyset: (created_at, id) below the row named by
// `after`. Stable under inserts, unlike OFFSET. An `after` that is not one of the org's
// rows gives an empty page. Conditions use $n placeholders numbered after the org
// ($1); the page's own parameters follow them.
import { all, one, type Queryable, type Row } from './pg-pool.js';

export interface PageQuery {
  table: string;
  orgId: string;
  /** Extra conditions, with placeholders $2, $3, … in the order of `params`. */
  where?: string[];
  params?: unknown[];
  limit: number;
  after?: string | undefined;
}

export async function newestFirstPage(db: Queryable, query: PageQuery): Promise<{ rows: Row[]; hasMore: boolean }> {
  const where = ['org_id = $1', ...(query.where ?? [])];
  const params: unknown[] = [query.orgId, ...(query.params ?? [])];
  if (query.after) {
    const cursor = await one(db, `SELECT created_at, id FROM ${query.table} WHERE id = $1 AND org_id = $2`, [query.after, query.orgId]);
    if (!cursor) return { rows: [], hasMore: false };
    params.push(cursor.created_at, cursor.id);
    const at = `$${params.length - 1}`;
    const id = `$${params.length}`;
    where.push(`(created_at < ${at} OR (created_at = ${at} AND id < ${id}))`);
  }
  params.push(query.limit + 1);
  const rows = await all(db, `SELECT * FROM ${query.table} WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params);
  return { rows: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
}
