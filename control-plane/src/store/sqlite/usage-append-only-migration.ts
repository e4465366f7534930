// Usage records are ledger lines too (every live inference request is one): like charges,
// credits and finalized invoices (migration 17) they can no longer be changed or removed.
// Nothing in the control plane updates or deletes them; a correction is a line of its
// own (a credit), and the request's `user` field is kept as sent (clients send an opaque
// or hashed id, as OpenAI advises). Sandbox records are guarded as well: one table, one rule.
import type { Migration } from './migrations.js';

export const USAGE_APPEND_ONLY_MIGRATION: Migration = {
  version: 21,
  name: 'usage records are append-only',
  sql: `
    CREATE TRIGGER usage_records_append_only BEFORE UPDATE ON usage_records BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
    CREATE TRIGGER usage_records_no_delete BEFORE DELETE ON usage_records BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
  `,
};
