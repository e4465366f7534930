// PostgreSQL implementation of the usage store. A batch of records is one INSERT
// (one round trip; the ledger's running totals are kept by a statement trigger in the
// same statement); the sandbox counter is one conditional upsert, so replicas cannot
// overshoot the cap together.
import type pg from 'pg';
import type { UsagePage, UsageRecord, UsageStore } from '../usage-store.js';
import { toRecord } from '../sqlite/usage-store.js';
import { newestFirstPage } from './newest-first-page.js';
import { one, storable } from './pg-pool.js';

/**
 * The batch goes as one array per column, so the statement text never changes with the
 * batch size: it is a named statement, parsed and planned once per connection, and any
 * batch fits (a row per placeholder group would cap a statement at 65,535 parameters and
 * make the server parse a new text every flush, on the same cores as the API).
 */
const APPEND: Pick<pg.QueryConfig, 'name' | 'text'> = {
  name: 'svc_usage_append',
  text: `INSERT INTO usage_records (id, org_id, key_id, request_id, kind, model, quantization, pool, prompt_tokens,
           completion_tokens, cost_nanos, "user", sandbox, created_at, duration_ms)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
           $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::boolean[], $14::bigint[], $15::bigint[])`,
};

/** The records' columns, in APPEND's order. */
function columns(records: readonly UsageRecord[]): unknown[][] {
  const cols: unknown[][] = [];
  for (const r of records) {
    const row = [
      r.id, r.orgId, r.keyId, r.requestId, r.kind, r.model, r.quantization, r.pool, r.promptTokens, r.completionTokens, r.costNanos,
      r.user, r.sandbox, r.createdAt, r.durationMs ?? null,
    ];
    for (let j = 0; j < row.length; j++) (cols[j] ??= []).push(storable(row[j]));
  }
  return cols;
}

export class PgUsageStore implements UsageStore {
  constructor(private readonly pool: pg.Pool) {}

  async append(records: readonly UsageRecord[]): Promise<void> {
    if (records.length === 0) return;
    // In org order, so the running totals' rows are locked in one order by every process.
    const sorted = [...records].sort((a, b) => (a.orgId < b.orgId ? -1 : a.orgId > b.orgId ? 1 : a.createdAt - b.createdAt));
    await this.pool.query({ ...APPEND, values: columns(sorted) });
  }

  async list(orgId: string, options: { limit: number; after?: string; model?: string; keyId?: string; from?: number; to?: number }): Promise<UsagePage> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (options.model) where.push(`model = $${params.push(options.model) + 1}`);
    if (options.keyId) where.push(`key_id = $${params.push(options.keyId) + 1}`);
    if (options.from !== undefined) where.push(`created_at >= $${params.push(options.from) + 1}`);
    if (options.to !== undefined) where.push(`created_at < $${params.push(options.to) + 1}`);
    const page = await newestFirstPage(this.pool, { table: 'usage_records', orgId, where, params, limit: options.limit, after: options.after });
    return { data: page.rows.map(toRecord), hasMore: page.hasMore };
  }

  async byRequest(orgId: string, requestId: string): Promise<UsageRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM usage_records WHERE org_id = $1 AND request_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1', [orgId, requestId]);
    return row && toRecord(row);
  }

  async takeSandboxTokens(keyId: string, day: string, tokens: number, cap: number): Promise<{ used: number; taken: boolean }> {
    // One statement on the path of every sandbox request: the conditional upsert locks the
    // row, so concurrent takers (on any replica) are applied one at a time.
    const taken = await one(
      this.pool,
      `INSERT INTO sandbox_tokens (key_id, day, tokens) SELECT $1::text, $2::text, $3::bigint WHERE $3::bigint <= $4::bigint
       ON CONFLICT (key_id, day) DO UPDATE SET tokens = sandbox_tokens.tokens + excluded.tokens
       WHERE sandbox_tokens.tokens + excluded.tokens <= $4::bigint
       RETURNING tokens`,
      [keyId, day, tokens, cap],
    );
    if (taken) return { used: Number(taken.tokens) - tokens, taken: true };
    return { used: await this.sandboxTokensUsed(keyId, day), taken: false };
  }

  async sandboxTokensUsed(keyId: string, day: string): Promise<number> {
    const row = await one(this.pool, 'SELECT tokens FROM sandbox_tokens WHERE key_id = $1 AND day = $2', [keyId, day]);
    return Number(row?.tokens ?? 0);
  }
}
