// SQLite implementation of the usage store. Statements are prepared once: appending a
// record is on the path of every inference request.
import type Database from 'better-sqlite3';
import type { UsageKind, UsagePage, UsageRecord, UsageStore } from '../usage-store.js';
import { newestFirstPage } from './newest-first-page.js';

type Row = Record<string, unknown>;

export function toRecord(row: Row): UsageRecord {
  return {
    id: String(row.id),
    orgId: String(row.org_id),
    keyId: String(row.key_id),
    requestId: String(row.request_id),
    kind: String(row.kind) as UsageKind,
    model: String(row.model),
    quantization: String(row.quantization),
    pool: String(row.pool),
    promptTokens: Number(row.prompt_tokens),
    completionTokens: Number(row.completion_tokens),
    costNanos: Number(row.cost_nanos),
    user: row.user === null ? null : String(row.user),
    sandbox: Number(row.sandbox) === 1,
    createdAt: Number(row.created_at),
    durationMs: row.duration_ms === null || row.duration_ms === undefined ? null : Number(row.duration_ms),
  };
}

export class SqliteUsageStore implements UsageStore {
  private readonly insert: Database.Statement;
  private readonly readTokens: Database.Statement;
  private readonly addTokens: Database.Statement;
  private readonly insertAll: Database.Transaction<(records: readonly UsageRecord[]) => void>;
  private readonly take: Database.Transaction<(keyId: string, day: string, tokens: number, cap: number) => { used: number; taken: boolean }>;

  constructor(private readonly db: Database.Database) {
    this.insert = db.prepare(
      `INSERT INTO usage_records (id, org_id, key_id, request_id, kind, model, quantization, pool, prompt_tokens,
         completion_tokens, cost_nanos, user, sandbox, created_at, duration_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    // Positional values: no copy of each record and no name lookups on this hot path.
    this.insertAll = db.transaction((records: readonly UsageRecord[]) => {
      for (const r of records) {
        this.insert.run(r.id, r.orgId, r.keyId, r.requestId, r.kind, r.model, r.quantization, r.pool, r.promptTokens, r.completionTokens, r.costNanos, r.user, r.sandbox ? 1 : 0, r.createdAt, r.durationMs ?? null);
      }
    });
    this.readTokens = db.prepare('SELECT tokens FROM sandbox_tokens WHERE key_id = ? AND day = ?');
    this.addTokens = db.prepare(
      `INSERT INTO sandbox_tokens (key_id, day, tokens) VALUES (?, ?, ?)
       ON CONFLICT (key_id, day) DO UPDATE SET tokens = tokens + excluded.tokens`,
    );
    this.take = db.transaction((keyId: string, day: string, tokens: number, cap: number) => {
      const used = ((this.readTokens.get(keyId, day) as Row | undefined)?.tokens as number | undefined) ?? 0;
      if (used + tokens > cap) return { used, taken: false };
      this.addTokens.run(keyId, day, tokens);
      return { used, taken: true };
    });
  }

  async append(records: readonly UsageRecord[]): Promise<void> {
    if (records.length > 0) this.insertAll.immediate(records);
  }

  async list(orgId: string, options: { limit: number; after?: string; model?: string; keyId?: string; from?: number; to?: number }): Promise<UsagePage> {
    const where: string[] = [];
    if (options.model) where.push('model = @model');
    if (options.keyId) where.push('key_id = @keyId');
    if (options.from !== undefined) where.push('created_at >= @from');
    if (options.to !== undefined) where.push('created_at < @to');
    const page = newestFirstPage(this.db, {
      table: 'usage_records',
      orgId,
      where,
      params: { model: options.model, keyId: options.keyId, from: options.from, to: options.to },
      limit: options.limit,
      after: options.after,
    });
    return { data: page.rows.map(toRecord), hasMore: page.hasMore };
  }

  async byRequest(orgId: string, requestId: string): Promise<UsageRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM usage_records WHERE org_id = ? AND request_id = ? ORDER BY created_at DESC, id DESC LIMIT 1').get(orgId, requestId) as Row | undefined;
    return row && toRecord(row);
  }

  async takeSandboxTokens(keyId: string, day: string, tokens: number, cap: number): Promise<{ used: number; taken: boolean }> {
    return this.take.immediate(keyId, day, tokens, cap);
  }

  async sandboxTokensUsed(keyId: string, day: string): Promise<number> {
    return ((this.readTokens.get(keyId, day) as Row | undefined)?.tokens as number | undefined) ?? 0;
  }
}
