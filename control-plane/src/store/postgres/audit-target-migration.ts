// PostgreSQL twin of SQLite migration 23: the operator audit trail indexed by target
// (see ../sqlite/audit-target-migration.ts).
import type { Migration } from '../sqlite/migrations.js';

export const AUDIT_TARGET_MIGRATION: Migration = {
  version: 23,
  name: 'operator audit: index by target and action',
  sql: `CREATE INDEX operator_audit_target ON operator_audit(target, action);`,
};
