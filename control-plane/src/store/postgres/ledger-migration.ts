// The ledger (SQLite migration 17): credits, org billing columns, running totals kept by
// triggers in the same transaction as each line, append-only guards, invoices and the
// ledger_lines view. Amounts are nano-dollars (charges are micro-dollars times 1,000).
// Differences from SQLite, same results:
// - The totals triggers are per statement (transition tables): a usage batch of many
//   records is one upsert per org and month, not one per record, and the upserts run in
//   key order, so two replicas flushing batches of the same orgs cannot deadlock.
// - instance_transitions gets `ord` (SQLite orders same-millisecond transitions by rowid).
import { TEXT } from './schema-text.js';
import type { Migration } from './migrations.js';

export const LEDGER_MIGRATION: Migration = {
  version: 17,
  name: 'ledger: credits, org billing mode and credit limit, running balances, the ledger_lines view',
  sql: `
    CREATE TABLE credits (
      id ${TEXT} PRIMARY KEY,
      org_id ${TEXT} NOT NULL,
      kind ${TEXT} NOT NULL CHECK (kind IN ('grant', 'sla_credit')),
      amount_nanos BIGINT NOT NULL CHECK (amount_nanos > 0),
      instance_id ${TEXT},
      period ${TEXT},
      description ${TEXT} NOT NULL,
      created_by ${TEXT},
      created_at BIGINT NOT NULL
    );
    CREATE INDEX credits_org ON credits(org_id, created_at);
    CREATE UNIQUE INDEX credits_sla_once ON credits(instance_id, period) WHERE kind = 'sla_credit';

    ALTER TABLE orgs ADD COLUMN billing_mode ${TEXT} NOT NULL DEFAULT 'postpaid' CHECK (billing_mode IN ('prepaid', 'postpaid'));
    ALTER TABLE orgs ADD COLUMN credit_limit_nanos BIGINT;
    ALTER TABLE orgs ADD COLUMN low_balance_nanos BIGINT;

    -- The UTC month ('YYYY-MM') of a time in ms, as SQLite's strftime('%Y-%m', ms / 1000, 'unixepoch').
    CREATE FUNCTION ledger_period(ms BIGINT) RETURNS TEXT LANGUAGE sql IMMUTABLE STRICT
      AS $$ SELECT to_char(to_timestamp(ms / 1000) AT TIME ZONE 'UTC', 'YYYY-MM') $$;

    CREATE TABLE org_balances (
      org_id ${TEXT} PRIMARY KEY,
      spent_nanos BIGINT NOT NULL DEFAULT 0,
      credited_nanos BIGINT NOT NULL DEFAULT 0
    );
    INSERT INTO org_balances (org_id, spent_nanos)
      SELECT org_id, SUM(amount) FROM (
        SELECT org_id, amount_micros * 1000 AS amount FROM charges
        UNION ALL
        SELECT org_id, cost_nanos FROM usage_records WHERE NOT sandbox
      ) lines GROUP BY org_id;

    CREATE TABLE org_month_totals (
      org_id ${TEXT} NOT NULL,
      period ${TEXT} NOT NULL,
      amount_nanos BIGINT NOT NULL,
      PRIMARY KEY (org_id, period)
    );
    INSERT INTO org_month_totals (org_id, period, amount_nanos)
      SELECT org_id, ledger_period(created_at), SUM(amount) FROM (
        SELECT org_id, created_at, amount_micros * 1000 AS amount FROM charges
        UNION ALL
        SELECT org_id, created_at, cost_nanos FROM usage_records WHERE NOT sandbox
      ) lines GROUP BY org_id, ledger_period(created_at);

    -- Running totals, per statement: a usage batch of many records is one upsert per org
    -- and month. Rows are upserted in key order, so concurrent writers lock them in one order.
    CREATE FUNCTION charges_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO org_balances AS b (org_id, spent_nanos)
        SELECT org_id, SUM(amount_micros * 1000) FROM new_lines GROUP BY org_id ORDER BY org_id
        ON CONFLICT (org_id) DO UPDATE SET spent_nanos = b.spent_nanos + excluded.spent_nanos;
      INSERT INTO org_month_totals AS m (org_id, period, amount_nanos)
        SELECT org_id, ledger_period(created_at), SUM(amount_micros * 1000) FROM new_lines GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (org_id, period) DO UPDATE SET amount_nanos = m.amount_nanos + excluded.amount_nanos;
      RETURN NULL;
    END $$;
    CREATE TRIGGER charges_balance AFTER INSERT ON charges REFERENCING NEW TABLE AS new_lines
      FOR EACH STATEMENT EXECUTE FUNCTION charges_totals();

    CREATE FUNCTION usage_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO org_balances AS b (org_id, spent_nanos)
        SELECT org_id, SUM(cost_nanos) FROM new_lines WHERE NOT sandbox GROUP BY org_id ORDER BY org_id
        ON CONFLICT (org_id) DO UPDATE SET spent_nanos = b.spent_nanos + excluded.spent_nanos;
      INSERT INTO org_month_totals AS m (org_id, period, amount_nanos)
        SELECT org_id, ledger_period(created_at), SUM(cost_nanos) FROM new_lines WHERE NOT sandbox GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (org_id, period) DO UPDATE SET amount_nanos = m.amount_nanos + excluded.amount_nanos;
      RETURN NULL;
    END $$;
    CREATE TRIGGER usage_balance AFTER INSERT ON usage_records REFERENCING NEW TABLE AS new_lines
      FOR EACH STATEMENT EXECUTE FUNCTION usage_totals();

    CREATE FUNCTION credits_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO org_balances AS b (org_id, credited_nanos)
        SELECT org_id, SUM(amount_nanos) FROM new_lines GROUP BY org_id ORDER BY org_id
        ON CONFLICT (org_id) DO UPDATE SET credited_nanos = b.credited_nanos + excluded.credited_nanos;
      INSERT INTO org_month_totals AS m (org_id, period, amount_nanos)
        SELECT org_id, ledger_period(created_at), -SUM(amount_nanos) FROM new_lines GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (org_id, period) DO UPDATE SET amount_nanos = m.amount_nanos + excluded.amount_nanos;
      RETURN NULL;
    END $$;
    CREATE TRIGGER credits_balance AFTER INSERT ON credits REFERENCING NEW TABLE AS new_lines
      FOR EACH STATEMENT EXECUTE FUNCTION credits_totals();

    -- The ledger is append-only: lines are never changed or removed (TRUNCATE included).
    CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION '%', TG_ARGV[0];
    END $$;
    CREATE TRIGGER charges_append_only BEFORE UPDATE OR DELETE ON charges
      FOR EACH ROW EXECUTE FUNCTION refuse_change('the ledger is append-only');
    CREATE TRIGGER charges_no_truncate BEFORE TRUNCATE ON charges
      FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the ledger is append-only');
    CREATE TRIGGER credits_append_only BEFORE UPDATE OR DELETE ON credits
      FOR EACH ROW EXECUTE FUNCTION refuse_change('the ledger is append-only');
    CREATE TRIGGER credits_no_truncate BEFORE TRUNCATE ON credits
      FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the ledger is append-only');

    -- Finalized invoices: immutable; the number comes from one sequence across the provider.
    CREATE TABLE invoices (
      id ${TEXT} PRIMARY KEY,
      org_id ${TEXT} NOT NULL,
      period ${TEXT} NOT NULL,
      number ${TEXT} NOT NULL UNIQUE,
      body ${TEXT} NOT NULL,
      total_nanos BIGINT NOT NULL,
      finalized_at BIGINT NOT NULL,
      UNIQUE (org_id, period)
    );
    CREATE TABLE invoice_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), next BIGINT NOT NULL);
    INSERT INTO invoice_sequence (id, next) VALUES (1, 1);
    CREATE TRIGGER invoices_final BEFORE UPDATE OR DELETE ON invoices
      FOR EACH ROW EXECUTE FUNCTION refuse_change('a finalized invoice cannot change');
    CREATE TRIGGER invoices_no_truncate BEFORE TRUNCATE ON invoices
      FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('a finalized invoice cannot change');

    CREATE INDEX usage_records_org_time ON usage_records(org_id, created_at);
    ALTER TABLE usage_records ADD COLUMN duration_ms BIGINT;
    CREATE INDEX usage_records_request ON usage_records(org_id, request_id);
    CREATE INDEX charges_org_time ON charges(org_id, created_at);
    -- Insertion order of an instance's transitions (SQLite reads it from the rowid).
    ALTER TABLE instance_transitions ADD COLUMN ord BIGSERIAL;

    -- GPU-seconds of a compute line: its amount over the GPU-hour rate it was priced at
    -- (exact arithmetic, rounded half away from zero as SQLite's ROUND); a refund gives
    -- money back, not GPU time. Literals carry the "C" collation of the columns beside them.
    CREATE VIEW ledger_lines AS
      SELECT c.id AS id, c.org_id AS org_id, c.kind AS kind, c.amount_micros * 1000 AS amount_nanos, c.created_at AS created_at,
             c.instance_id AS instance_id, NULL::text COLLATE "C" AS request_id, i.key_id AS key_id, NULL::text COLLATE "C" AS model,
             i.sku AS sku, i.pool AS pool, COALESCE(i.labels, '{}') AS labels, 0::bigint AS input_tokens, 0::bigint AS output_tokens,
             CASE WHEN c.kind = 'refund' OR COALESCE(i.rate_micros, 0) <= 0 THEN 0::bigint
                  ELSE ROUND(c.amount_micros * 3600.0 / i.rate_micros)::bigint END AS gpu_seconds,
             0::bigint AS requests, c.description AS description
        FROM charges c LEFT JOIN instances i ON i.id = c.instance_id
      UNION ALL
      SELECT u.id, u.org_id, 'inference'::text COLLATE "C", u.cost_nanos, u.created_at,
             NULL::text COLLATE "C", u.request_id, u.key_id, u.model, NULL::text COLLATE "C", u.pool,
             '{}'::text COLLATE "C", u.prompt_tokens, u.completion_tokens, 0::bigint, 1::bigint, u.kind || ' ' || u.model
        FROM usage_records u WHERE NOT u.sandbox
      UNION ALL
      SELECT cr.id, cr.org_id, cr.kind, -cr.amount_nanos, cr.created_at,
             cr.instance_id, NULL::text COLLATE "C", NULL::text COLLATE "C", NULL::text COLLATE "C", i.sku, i.pool,
             COALESCE(i.labels, '{}'), 0::bigint, 0::bigint, 0::bigint, 0::bigint, cr.description
        FROM credits cr LEFT JOIN instances i ON i.id = cr.instance_id;
  `,
};
