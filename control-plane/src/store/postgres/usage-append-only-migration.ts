// PostgreSQL twin of SQLite migration 21: usage records, like charges and credits, cannot
// be updated, deleted or truncated (see ../sqlite/usage-append-only-migration.ts).
// refuse_change() comes from migration 17.
import type { Migration } from '../sqlite/migrations.js';

export const USAGE_APPEND_ONLY_MIGRATION: Migration = {
  version: 21,
  name: 'usage records are append-only',
  sql: `
    CREATE TRIGGER usage_records_append_only BEFORE UPDATE OR DELETE ON usage_records
      FOR EACH ROW EXECUTE FUNCTION refuse_change('the ledger is append-only');
    CREATE TRIGGER usage_records_no_truncate BEFORE TRUNCATE ON usage_records
      FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the ledger is append-only');
  `,
};
