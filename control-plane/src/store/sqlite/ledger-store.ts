// SQLite implementation of the ledger store over the ledger_lines view (migration 17).
// Rollups group in SQL by hour: a month of a busy org is many lines but few hour rows.
import type Database from 'better-sqlite3';
import type { Dimension, HourRow, LedgerKind, LedgerLine } from '../../billing/ledger.js';
import type { AccountAdmission, BillingAccount, BillingMode, CreditRecord, LedgerStore, SlaInstance, StoredInvoice } from '../ledger-store.js';
import type { CreditLine, InvoiceDraft } from '../../billing/invoice.js';

type Row = Record<string, unknown>;

const COLUMN: Record<string, string> = { model: 'model', key_id: 'key_id', instance_id: 'instance_id', sku: 'sku', pool: 'pool', kind: 'kind' };

const nullable = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/**
 * The query of an org's account (toBillingAccount's columns); `period` and `org` are the
 * engine's placeholders. The amounts come back as text: running totals can pass 2^53
 * nano-dollars (about $9.0M spent over an org's life), where PostgreSQL's int8 parser
 * refuses the value (pg-pool.ts) and the balance, and every billable request's check,
 * would fail; read as text they round to the nearest number instead, on both engines.
 */
export const accountQuery = (period: string, org: string): string =>
  `SELECT o.id, o.billing_mode, CAST(o.credit_limit_nanos AS TEXT) AS credit_limit_nanos, CAST(o.low_balance_nanos AS TEXT) AS low_balance_nanos,
          CAST(COALESCE(b.spent_nanos, 0) AS TEXT) AS spent_nanos, CAST(COALESCE(b.credited_nanos, 0) AS TEXT) AS credited_nanos,
          CAST(COALESCE(m.amount_nanos, 0) AS TEXT) AS period_nanos
     FROM orgs o LEFT JOIN org_balances b ON b.org_id = o.id
     LEFT JOIN org_month_totals m ON m.org_id = o.id AND m.period = ${period}
    WHERE o.id = ${org}`;

/**
 * Applies `admission` to the org's account inside the caller's immediate transaction: no
 * other writer, in this process or another, runs between this read and the commit of what
 * it admits.
 */
export function admitOnAccount(db: Database.Database, orgId: string, admission: AccountAdmission | undefined): void {
  if (!admission) return;
  const row = db.prepare(accountQuery('?', '?')).get(admission.period, orgId) as Row | undefined;
  if (!row) throw new Error(`no org ${orgId}`);
  admission.admit(toBillingAccount(orgId, row));
}

/** An org's billing settings and running totals; PostgreSQL's store selects the same columns. */
export const toBillingAccount = (orgId: string, row: Row): BillingAccount => ({
  orgId,
  mode: String(row.billing_mode) as BillingMode,
  creditLimitNanos: row.credit_limit_nanos === null ? null : Number(row.credit_limit_nanos),
  lowBalanceNanos: row.low_balance_nanos === null ? null : Number(row.low_balance_nanos),
  spentNanos: Number(row.spent_nanos),
  creditedNanos: Number(row.credited_nanos),
  periodNanos: Number(row.period_nanos),
});

/**
 * An instance row with its transition out of `ready` (left_at, left_to, left_reason) and
 * whether an operator terminated it, as the SLA reads it; PostgreSQL's store selects the
 * same columns.
 */
export const toSlaInstance = (r: Row): SlaInstance => ({
  id: String(r.id),
  orgId: String(r.org_id),
  mode: String(r.mode) as SlaInstance['mode'],
  nodeId: nullable(r.node_id),
  gpuUuids: JSON.parse(String(r.gpu_uuids)) as string[],
  gpus: Number(r.gpus),
  rateMicros: Number(r.rate_micros),
  readyAt: r.ready_at === null ? null : Number(r.ready_at),
  endedAt: r.terminated_at === null ? null : Number(r.terminated_at),
  expiresAt: r.expires_at === null ? null : Number(r.expires_at),
  billedSeconds: Number(r.billed_seconds),
  status: String(r.status) as SlaInstance['status'],
  leftReadyAt: r.left_at === null || r.left_at === undefined ? null : Number(r.left_at),
  leftReadyUnasked: r.left_to === 'terminated' || r.left_to === 'failed' || (r.left_to === 'draining' && r.left_reason !== null && r.left_reason !== undefined),
  // SQLite answers EXISTS with 1 or 0, PostgreSQL with a boolean.
  terminatedByOperator: r.ended_by_operator === true || r.ended_by_operator === 1,
});

export function toLine(row: Row): LedgerLine {
  return {
    id: String(row.id),
    orgId: String(row.org_id),
    kind: String(row.kind) as LedgerKind,
    amountNanos: Number(row.amount_nanos),
    createdAt: Number(row.created_at),
    instanceId: nullable(row.instance_id),
    requestId: nullable(row.request_id),
    keyId: nullable(row.key_id),
    model: nullable(row.model),
    sku: nullable(row.sku),
    pool: nullable(row.pool),
    labels: JSON.parse(String(row.labels)) as Record<string, string>,
    inputTokens: Number(row.input_tokens),
    outputTokens: Number(row.output_tokens),
    gpuSeconds: Number(row.gpu_seconds),
    requests: Number(row.requests),
    description: String(row.description),
  };
}

export class SqliteLedgerStore implements LedgerStore {
  private readonly insertCredit: Database.Statement;
  private readonly readAccount: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.insertCredit = db.prepare(
      `INSERT INTO credits (id, org_id, kind, amount_nanos, instance_id, period, description, created_by, created_at)
       VALUES (@id, @orgId, @kind, @amountNanos, @instanceId, @period, @description, @createdBy, @createdAt)
       ON CONFLICT DO NOTHING`,
    );
    this.readAccount = db.prepare(accountQuery('?', '?'));
  }

  async lines(orgId: string, range: { from: number; to: number }, page: { limit: number; after?: { createdAt: number; id: string } }): Promise<LedgerLine[]> {
    const after = page.after ? 'AND (created_at > @afterAt OR (created_at = @afterAt AND id > @afterId))' : '';
    const rows = this.db
      .prepare(
        `SELECT * FROM ledger_lines WHERE org_id = @orgId AND created_at >= @from AND created_at < @to ${after}
         ORDER BY created_at, id LIMIT @limit`,
      )
      .all({ orgId, from: range.from, to: range.to, limit: page.limit, afterAt: page.after?.createdAt, afterId: page.after?.id }) as Row[];
    return rows.map(toLine);
  }

  async hourly(orgId: string, range: { from: number; to: number }, dimensions: readonly Dimension[]): Promise<HourRow[]> {
    const params: Record<string, unknown> = { orgId, from: range.from, to: range.to };
    const selects = dimensions.map((d, i) => {
      if (d.startsWith('label:')) {
        // The label name travels as a bound JSON path, never spliced into the SQL.
        params[`label${i}`] = `$."${d.slice(6)}"`;
        return `json_extract(labels, @label${i}) AS d${i}`;
      }
      return `${COLUMN[d]} AS d${i}`;
    });
    const groupBy = ['hour_start', ...dimensions.map((_, i) => `d${i}`)].join(', ');
    const rows = this.db
      .prepare(
        `SELECT (created_at / 3600000) * 3600000 AS hour_start${selects.map((s) => `, ${s}`).join('')},
                SUM(amount_nanos) AS amount, SUM(input_tokens) AS input, SUM(output_tokens) AS output,
                SUM(gpu_seconds) AS gpu_seconds, SUM(requests) AS requests, COUNT(*) AS lines
           FROM ledger_lines WHERE org_id = @orgId AND created_at >= @from AND created_at < @to
          GROUP BY ${groupBy}`,
      )
      .all(params) as Row[];
    return rows.map((r) => ({
      hourStart: Number(r.hour_start),
      group: dimensions.map((_, i) => nullable(r[`d${i}`])),
      amountNanos: Number(r.amount),
      inputTokens: Number(r.input),
      outputTokens: Number(r.output),
      gpuSeconds: Number(r.gpu_seconds),
      requests: Number(r.requests),
      lines: Number(r.lines),
    }));
  }

  async addCredit(credit: CreditRecord, admission?: AccountAdmission): Promise<boolean> {
    if (!admission) return this.insertCredit.run(credit).changes === 1;
    return this.db
      .transaction(() => {
        admitOnAccount(this.db, credit.orgId, admission);
        return this.insertCredit.run(credit).changes === 1;
      })
      .immediate();
  }

  async account(orgId: string, period: string): Promise<BillingAccount> {
    const row = this.readAccount.get(period, orgId) as Row | undefined;
    if (!row) throw new Error(`no org ${orgId}`);
    return toBillingAccount(orgId, row);
  }

  async credits(orgId: string, range: { from: number; to: number }): Promise<CreditLine[]> {
    const rows = this.db
      .prepare('SELECT id, kind, amount_nanos, description, created_at FROM credits WHERE org_id = ? AND created_at >= ? AND created_at < ? ORDER BY created_at, id')
      .all(orgId, range.from, range.to) as Row[];
    return rows.map((r) => ({ id: String(r.id), kind: String(r.kind) as CreditLine['kind'], amountNanos: Number(r.amount_nanos), description: String(r.description), createdAt: Number(r.created_at) }));
  }

  async orgsWithLines(range: { from: number; to: number }): Promise<string[]> {
    const rows = this.db.prepare('SELECT DISTINCT org_id FROM ledger_lines WHERE created_at >= ? AND created_at < ? ORDER BY org_id').all(range.from, range.to) as Row[];
    return rows.map((r) => String(r.org_id));
  }

  async finalizeInvoice(id: string, draft: InvoiceDraft, numberFor: (sequence: number) => string, at: number): Promise<StoredInvoice | undefined> {
    return this.db
      .transaction((): StoredInvoice | undefined => {
        if (this.db.prepare('SELECT 1 FROM invoices WHERE org_id = ? AND period = ?').get(draft.orgId, draft.period)) return undefined;
        const sequence = Number((this.db.prepare('UPDATE invoice_sequence SET next = next + 1 WHERE id = 1 RETURNING next - 1 AS taken').get() as Row).taken);
        const stored: StoredInvoice = { ...draft, id, number: numberFor(sequence), finalizedAt: at };
        this.db
          .prepare('INSERT INTO invoices (id, org_id, period, number, body, total_nanos, finalized_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
          .run(id, draft.orgId, draft.period, stored.number, JSON.stringify(stored), draft.totalNanos, at);
        return stored;
      })
      .immediate();
  }

  async listInvoices(orgId: string): Promise<StoredInvoice[]> {
    const rows = this.db.prepare('SELECT body FROM invoices WHERE org_id = ? ORDER BY period DESC').all(orgId) as Row[];
    return rows.map((r) => JSON.parse(String(r.body)) as StoredInvoice);
  }

  async getInvoice(orgId: string, id: string): Promise<StoredInvoice | undefined> {
    const row = this.db.prepare('SELECT body FROM invoices WHERE org_id = ? AND id = ?').get(orgId, id) as Row | undefined;
    return row ? (JSON.parse(String(row.body)) as StoredInvoice) : undefined;
  }

  async slaInstances(range: { from: number; to: number } | { instanceId: string }): Promise<SlaInstance[]> {
    const where = 'instanceId' in range ? 'i.id = @instanceId' : "i.ready_at IS NOT NULL AND i.ready_at < @to AND (i.terminated_at IS NULL OR i.terminated_at >= @from OR (i.mode = 'reserved' AND i.expires_at > @from))";
    const rows = this.db
      .prepare(
        `SELECT i.id, i.org_id, i.mode, i.status, i.node_id, i.gpu_uuids, i.gpus, i.rate_micros, i.ready_at, i.terminated_at, i.expires_at, i.billed_seconds,
                t.at AS left_at, t.to_status AS left_to, t.reason AS left_reason,
                EXISTS (SELECT 1 FROM operator_audit a WHERE a.target = i.id AND a.action = 'terminateInstance') AS ended_by_operator
           FROM instances i
           LEFT JOIN instance_transitions t ON t.rowid = (SELECT l.rowid FROM instance_transitions l WHERE l.instance_id = i.id AND l.from_status = 'ready' ORDER BY l.at DESC, l.rowid DESC LIMIT 1)
          WHERE ${where}`,
      )
      .all(range) as Row[];
    return rows.map(toSlaInstance);
  }

  async setAccount(orgId: string, patch: Partial<Pick<BillingAccount, 'mode' | 'creditLimitNanos' | 'lowBalanceNanos'>>): Promise<void> {
    const sets: string[] = [];
    if (patch.mode !== undefined) sets.push('billing_mode = @mode');
    if (patch.creditLimitNanos !== undefined) sets.push('credit_limit_nanos = @creditLimitNanos');
    if (patch.lowBalanceNanos !== undefined) sets.push('low_balance_nanos = @lowBalanceNanos');
    if (sets.length > 0) this.db.prepare(`UPDATE orgs SET ${sets.join(', ')} WHERE id = @orgId`).run({ orgId, mode: null, creditLimitNanos: null, lowBalanceNanos: null, ...patch });
  }
}
