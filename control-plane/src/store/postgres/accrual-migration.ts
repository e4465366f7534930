// PostgreSQL twin of SQLite migration 22: the on-demand seconds an instance's lines
// already bill (see ../sqlite/accrual-migration.ts).
import type { Migration } from '../sqlite/migrations.js';

export const ACCRUAL_MIGRATION: Migration = {
  version: 22,
  name: 'on-demand accrual: instances.billed_seconds',
  sql: `ALTER TABLE instances ADD COLUMN billed_seconds BIGINT NOT NULL DEFAULT 0;`,
};
