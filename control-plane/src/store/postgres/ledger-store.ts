// PostgreSQL implementation of the ledger store over the ledger_lines view (migration
// 17). Rollups group in SQL by hour, as on SQLite. Invoices are numbered under a row
// lock on the one sequence row, so replicas finalizing together never share a number
// or finalize one org's month twice.
import type pg from 'pg';
import type { Dimension, HourRow, LedgerLine } from '../../billing/ledger.js';
import type { AccountAdmission, BillingAccount, CreditRecord, LedgerStore, SlaInstance, StoredInvoice } from '../ledger-store.js';
import type { CreditLine, InvoiceDraft } from '../../billing/invoice.js';
import { accountQuery, toBillingAccount, toLine, toSlaInstance } from '../sqlite/ledger-store.js';
import { all, inTransaction, one, run, type Queryable } from './pg-pool.js';

/**
 * Applies `admission` to the org's account inside the caller's transaction: one change of
 * an org's money at a time, across replicas, from this read to the commit (the advisory
 * lock is the transaction's), so the next one reads the account with this one in it.
 */
export async function admitOnAccount(client: pg.ClientBase, orgId: string, admission: AccountAdmission | undefined): Promise<void> {
  if (!admission) return;
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended('svc-org-money:' || $1, 0))", [orgId]);
  const row = await one(client, accountQuery('$1', '$2'), [admission.period, orgId]);
  if (!row) throw new Error(`no org ${orgId}`);
  admission.admit(toBillingAccount(orgId, row));
}

const COLUMN: Record<string, string> = { model: 'model', key_id: 'key_id', instance_id: 'instance_id', sku: 'sku', pool: 'pool', kind: 'kind' };

const nullable = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

export class PgLedgerStore implements LedgerStore {
  constructor(private readonly pool: pg.Pool) {}

  async lines(orgId: string, range: { from: number; to: number }, page: { limit: number; after?: { createdAt: number; id: string } }): Promise<LedgerLine[]> {
    const params: unknown[] = [orgId, range.from, range.to, page.limit];
    const after = page.after ? `AND (created_at > $${params.push(page.after.createdAt)} OR (created_at = $${params.length} AND id > $${params.push(page.after.id)}))` : '';
    const rows = await all(
      this.pool,
      `SELECT * FROM ledger_lines WHERE org_id = $1 AND created_at >= $2 AND created_at < $3 ${after} ORDER BY created_at, id LIMIT $4`,
      params,
    );
    return rows.map(toLine);
  }

  async hourly(orgId: string, range: { from: number; to: number }, dimensions: readonly Dimension[]): Promise<HourRow[]> {
    const params: unknown[] = [orgId, range.from, range.to];
    const selects = dimensions.map((d, i) => {
      // The label name is a bound parameter, never spliced into the SQL.
      if (d.startsWith('label:')) return `labels::jsonb ->> $${params.push(d.slice(6))}::text AS d${i}`;
      return `${COLUMN[d]} AS d${i}`;
    });
    const groupBy = ['hour_start', ...dimensions.map((_, i) => `d${i}`)].join(', ');
    const rows = await all(
      this.pool,
      `SELECT (created_at / 3600000) * 3600000 AS hour_start${selects.map((s) => `, ${s}`).join('')},
              SUM(amount_nanos) AS amount, SUM(input_tokens) AS input, SUM(output_tokens) AS output,
              SUM(gpu_seconds) AS gpu_seconds, SUM(requests) AS requests, COUNT(*) AS lines
         FROM ledger_lines WHERE org_id = $1 AND created_at >= $2 AND created_at < $3
        GROUP BY ${groupBy}`,
      params,
    );
    return rows.map((r) => ({
      hourStart: Number(r.hour_start),
      group: dimensions.map((_, i) => nullable(r[`d${i}`])),
      amountNanos: safe(r.amount),
      inputTokens: safe(r.input),
      outputTokens: safe(r.output),
      gpuSeconds: safe(r.gpu_seconds),
      requests: safe(r.requests),
      lines: Number(r.lines),
    }));
  }

  async addCredit(credit: CreditRecord, admission?: AccountAdmission): Promise<boolean> {
    if (admission) {
      return inTransaction(this.pool, async (client) => {
        await admitOnAccount(client, credit.orgId, admission);
        return this.insertCredit(client, credit);
      });
    }
    return this.insertCredit(this.pool, credit);
  }

  private async insertCredit(db: Queryable, credit: CreditRecord): Promise<boolean> {
    const inserted = await run(
      db,
      `INSERT INTO credits (id, org_id, kind, amount_nanos, instance_id, period, description, created_by, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
      [credit.id, credit.orgId, credit.kind, credit.amountNanos, credit.instanceId, credit.period, credit.description, credit.createdBy, credit.createdAt],
    );
    return inserted === 1;
  }

  async account(orgId: string, period: string): Promise<BillingAccount> {
    const row = await one(
      this.pool,
      accountQuery('$1', '$2'),
      [period, orgId],
    );
    if (!row) throw new Error(`no org ${orgId}`);
    return toBillingAccount(orgId, row);
  }

  async credits(orgId: string, range: { from: number; to: number }): Promise<CreditLine[]> {
    const rows = await all(
      this.pool,
      'SELECT id, kind, amount_nanos, description, created_at FROM credits WHERE org_id = $1 AND created_at >= $2 AND created_at < $3 ORDER BY created_at, id',
      [orgId, range.from, range.to],
    );
    return rows.map((r) => ({ id: String(r.id), kind: String(r.kind) as CreditLine['kind'], amountNanos: Number(r.amount_nanos), description: String(r.description), createdAt: Number(r.created_at) }));
  }

  async orgsWithLines(range: { from: number; to: number }): Promise<string[]> {
    const rows = await all(this.pool, 'SELECT DISTINCT org_id FROM ledger_lines WHERE created_at >= $1 AND created_at < $2 ORDER BY org_id', [range.from, range.to]);
    return rows.map((r) => String(r.org_id));
  }

  async finalizeInvoice(id: string, draft: InvoiceDraft, numberFor: (sequence: number) => string, at: number): Promise<StoredInvoice | undefined> {
    return inTransaction(this.pool, async (client) => {
      // The sequence row's lock serializes finalizers: the check below then sees an
      // invoice another replica committed while this one waited.
      await one(client, 'SELECT next FROM invoice_sequence WHERE id = 1 FOR UPDATE');
      if (await one(client, 'SELECT 1 FROM invoices WHERE org_id = $1 AND period = $2', [draft.orgId, draft.period])) return undefined;
      const sequence = Number((await one(client, 'UPDATE invoice_sequence SET next = next + 1 WHERE id = 1 RETURNING next - 1 AS taken'))!.taken);
      const stored: StoredInvoice = { ...draft, id, number: numberFor(sequence), finalizedAt: at };
      await run(client, 'INSERT INTO invoices (id, org_id, period, number, body, total_nanos, finalized_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
        id,
        draft.orgId,
        draft.period,
        stored.number,
        JSON.stringify(stored),
        draft.totalNanos,
        at,
      ]);
      return stored;
    });
  }

  async listInvoices(orgId: string): Promise<StoredInvoice[]> {
    const rows = await all(this.pool, 'SELECT body FROM invoices WHERE org_id = $1 ORDER BY period DESC', [orgId]);
    return rows.map((r) => JSON.parse(String(r.body)) as StoredInvoice);
  }

  async getInvoice(orgId: string, id: string): Promise<StoredInvoice | undefined> {
    const row = await one(this.pool, 'SELECT body FROM invoices WHERE org_id = $1 AND id = $2', [orgId, id]);
    return row ? (JSON.parse(String(row.body)) as StoredInvoice) : undefined;
  }

  async slaInstances(range: { from: number; to: number } | { instanceId: string }): Promise<SlaInstance[]> {
    const [where, params]: [string, unknown[]] =
      'instanceId' in range
        ? ['i.id = $1', [range.instanceId]]
        : ["i.ready_at IS NOT NULL AND i.ready_at < $2 AND (i.terminated_at IS NULL OR i.terminated_at >= $1 OR (i.mode = 'reserved' AND i.expires_at > $1))", [range.from, range.to]];
    const rows = await all(
      this.pool,
      `SELECT i.id, i.org_id, i.mode, i.status, i.node_id, i.gpu_uuids, i.gpus, i.rate_micros, i.ready_at, i.terminated_at, i.expires_at, i.billed_seconds,
              t.at AS left_at, t.to_status AS left_to, t.reason AS left_reason,
              EXISTS (SELECT 1 FROM operator_audit a WHERE a.target = i.id AND a.action = 'terminateInstance') AS ended_by_operator
         FROM instances i
         LEFT JOIN LATERAL (SELECT at, to_status, reason FROM instance_transitions
                             WHERE instance_id = i.id AND from_status = 'ready' ORDER BY at DESC, ord DESC LIMIT 1) t ON TRUE
        WHERE ${where}`,
      params,
    );
    return rows.map(toSlaInstance);
  }

  async setAccount(orgId: string, patch: Partial<Pick<BillingAccount, 'mode' | 'creditLimitNanos' | 'lowBalanceNanos'>>): Promise<void> {
    const sets: string[] = [];
    const params: unknown[] = [orgId];
    if (patch.mode !== undefined) sets.push(`billing_mode = $${params.push(patch.mode)}`);
    if (patch.creditLimitNanos !== undefined) sets.push(`credit_limit_nanos = $${params.push(patch.creditLimitNanos)}`);
    if (patch.lowBalanceNanos !== undefined) sets.push(`low_balance_nanos = $${params.push(patch.lowBalanceNanos)}`);
    if (sets.length > 0) await run(this.pool, `UPDATE orgs SET ${sets.join(', ')} WHERE id = $1`, params);
  }
}

/** SUM over bigint is numeric in PostgreSQL (text here): read exactly or refused, never rounded. */
function safe(value: unknown): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new RangeError(`sum ${String(value)} is outside the safe integer range`);
  return n;
}
