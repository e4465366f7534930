// One ledger for everything billable (issue: accounts a customer can run a business on).
// Compute charges and inference usage records stay where they are written, in the same
// transactions as the work they bill; credits (grants, SLA credit-back) get a table of
// their own; `ledger_lines` reads the three as one append-only ledger in nano-dollars
// (1e-9 USD: a token costs a fraction of a micro-dollar, so inference lines are exact
// only in nanos; charges are micro-dollars times 1,000). Each org's running totals are
// kept by triggers in the same transaction as each line, so a balance is one row read.
// Version 17: other branches add migrations 14-16 side by side.
import type { Migration } from './migrations.js';

export const LEDGER_MIGRATION: Migration = {
  version: 17,
  name: 'ledger: credits, org billing mode and credit limit, running balances, the ledger_lines view',
  sql: `
    CREATE TABLE credits (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('grant', 'sla_credit')),
      -- Positive: what the customer is given.
      amount_nanos INTEGER NOT NULL CHECK (amount_nanos > 0),
      instance_id TEXT,
      -- 'YYYY-MM' of the month an SLA credit is for; one per instance and month.
      period TEXT,
      description TEXT NOT NULL,
      created_by TEXT,
      created_at INTEGER NOT NULL
    );
    CREATE INDEX credits_org ON credits(org_id, created_at);
    CREATE UNIQUE INDEX credits_sla_once ON credits(instance_id, period) WHERE kind = 'sla_credit';

    ALTER TABLE orgs ADD COLUMN billing_mode TEXT NOT NULL DEFAULT 'postpaid' CHECK (billing_mode IN ('prepaid', 'postpaid'));
    -- Postpaid only: the most a month's bill may reach before new billable work is refused; NULL = no limit.
    ALTER TABLE orgs ADD COLUMN credit_limit_nanos INTEGER;
    -- A billing.balance_low event is sent when the balance falls below this; NULL = never.
    ALTER TABLE orgs ADD COLUMN low_balance_nanos INTEGER;

    CREATE TABLE org_balances (
      org_id TEXT PRIMARY KEY,
      spent_nanos INTEGER NOT NULL DEFAULT 0,
      credited_nanos INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    INSERT INTO org_balances (org_id, spent_nanos)
      SELECT org_id, SUM(amount) FROM (
        SELECT org_id, amount_micros * 1000 AS amount FROM charges
        UNION ALL
        SELECT org_id, cost_nanos AS amount FROM usage_records WHERE sandbox = 0
      ) GROUP BY org_id;

    -- Each month's net bill (credits netted), for credit limits and the balance page.
    CREATE TABLE org_month_totals (
      org_id TEXT NOT NULL,
      period TEXT NOT NULL,
      amount_nanos INTEGER NOT NULL,
      PRIMARY KEY (org_id, period)
    ) WITHOUT ROWID;
    INSERT INTO org_month_totals (org_id, period, amount_nanos)
      SELECT org_id, period, SUM(amount) FROM (
        SELECT org_id, strftime('%Y-%m', created_at / 1000, 'unixepoch') AS period, amount_micros * 1000 AS amount FROM charges
        UNION ALL
        SELECT org_id, strftime('%Y-%m', created_at / 1000, 'unixepoch'), cost_nanos FROM usage_records WHERE sandbox = 0
      ) GROUP BY org_id, period;

    CREATE TRIGGER charges_balance AFTER INSERT ON charges BEGIN
      INSERT INTO org_balances (org_id, spent_nanos) VALUES (NEW.org_id, NEW.amount_micros * 1000)
        ON CONFLICT (org_id) DO UPDATE SET spent_nanos = spent_nanos + excluded.spent_nanos;
      INSERT INTO org_month_totals (org_id, period, amount_nanos) VALUES (NEW.org_id, strftime('%Y-%m', NEW.created_at / 1000, 'unixepoch'), NEW.amount_micros * 1000)
        ON CONFLICT (org_id, period) DO UPDATE SET amount_nanos = amount_nanos + excluded.amount_nanos;
    END;
    CREATE TRIGGER usage_balance AFTER INSERT ON usage_records WHEN NEW.sandbox = 0 BEGIN
      INSERT INTO org_balances (org_id, spent_nanos) VALUES (NEW.org_id, NEW.cost_nanos)
        ON CONFLICT (org_id) DO UPDATE SET spent_nanos = spent_nanos + excluded.spent_nanos;
      INSERT INTO org_month_totals (org_id, period, amount_nanos) VALUES (NEW.org_id, strftime('%Y-%m', NEW.created_at / 1000, 'unixepoch'), NEW.cost_nanos)
        ON CONFLICT (org_id, period) DO UPDATE SET amount_nanos = amount_nanos + excluded.amount_nanos;
    END;
    CREATE TRIGGER credits_balance AFTER INSERT ON credits BEGIN
      INSERT INTO org_balances (org_id, credited_nanos) VALUES (NEW.org_id, NEW.amount_nanos)
        ON CONFLICT (org_id) DO UPDATE SET credited_nanos = credited_nanos + excluded.credited_nanos;
      INSERT INTO org_month_totals (org_id, period, amount_nanos) VALUES (NEW.org_id, strftime('%Y-%m', NEW.created_at / 1000, 'unixepoch'), -NEW.amount_nanos)
        ON CONFLICT (org_id, period) DO UPDATE SET amount_nanos = amount_nanos + excluded.amount_nanos;
    END;
    -- The ledger is append-only: lines are never changed or removed.
    CREATE TRIGGER charges_append_only BEFORE UPDATE ON charges BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
    CREATE TRIGGER charges_no_delete BEFORE DELETE ON charges BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
    CREATE TRIGGER credits_append_only BEFORE UPDATE ON credits BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
    CREATE TRIGGER credits_no_delete BEFORE DELETE ON credits BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;

    -- Finalized invoices: immutable; the number comes from one sequence across the provider.
    CREATE TABLE invoices (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL,
      period TEXT NOT NULL,
      number TEXT NOT NULL UNIQUE,
      body TEXT NOT NULL,
      total_nanos INTEGER NOT NULL,
      finalized_at INTEGER NOT NULL,
      UNIQUE (org_id, period)
    );
    CREATE TABLE invoice_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), next INTEGER NOT NULL);
    INSERT INTO invoice_sequence (id, next) VALUES (1, 1);
    CREATE TRIGGER invoices_final BEFORE UPDATE ON invoices BEGIN SELECT RAISE(ABORT, 'a finalized invoice cannot change'); END;
    CREATE TRIGGER invoices_kept BEFORE DELETE ON invoices BEGIN SELECT RAISE(ABORT, 'a finalized invoice cannot change'); END;

    CREATE INDEX usage_records_org_time ON usage_records(org_id, created_at);
    -- Request metadata (GET /v1/requests/{id}): how long the request took to serve.
    ALTER TABLE usage_records ADD COLUMN duration_ms INTEGER;
    CREATE INDEX usage_records_request ON usage_records(org_id, request_id);
    CREATE INDEX charges_org_time ON charges(org_id, created_at);

    -- GPU-seconds of a compute line: its amount over the GPU-hour rate it was priced at
    -- (exact for reservations and extensions, exact to the second for on-demand runs);
    -- a refund gives money back, not GPU time.
    CREATE VIEW ledger_lines AS
      SELECT c.id AS id, c.org_id AS org_id, c.kind AS kind, c.amount_micros * 1000 AS amount_nanos, c.created_at AS created_at,
             c.instance_id AS instance_id, NULL AS request_id, i.key_id AS key_id, NULL AS model, i.sku AS sku, i.pool AS pool,
             COALESCE(i.labels, '{}') AS labels, 0 AS input_tokens, 0 AS output_tokens,
             CASE WHEN c.kind = 'refund' OR COALESCE(i.rate_micros, 0) <= 0 THEN 0
                  ELSE CAST(ROUND(c.amount_micros * 3600.0 / i.rate_micros) AS INTEGER) END AS gpu_seconds,
             0 AS requests, c.description AS description
        FROM charges c LEFT JOIN instances i ON i.id = c.instance_id
      UNION ALL
      SELECT u.id, u.org_id, 'inference', u.cost_nanos, u.created_at,
             NULL, u.request_id, u.key_id, u.model, NULL, u.pool,
             '{}', u.prompt_tokens, u.completion_tokens, 0, 1, u.kind || ' ' || u.model
        FROM usage_records u WHERE u.sandbox = 0
      UNION ALL
      SELECT cr.id, cr.org_id, cr.kind, -cr.amount_nanos, cr.created_at,
             cr.instance_id, NULL, NULL, NULL, i.sku, i.pool,
             COALESCE(i.labels, '{}'), 0, 0, 0, 0, cr.description
        FROM credits cr LEFT JOIN instances i ON i.id = cr.instance_id;
  `,
};
