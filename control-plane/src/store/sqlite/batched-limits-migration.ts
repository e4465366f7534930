// Version 24 is PostgreSQL's batched admission function (../postgres/batched-limits-migration.ts).
// SQLite keeps its limits in the one process's memory and has nothing to add; the version
// is recorded anyway, so one number means one schema on both engines.
import type { Migration } from './migrations.js';

export const BATCHED_LIMITS_MIGRATION: Migration = {
  version: 24,
  name: 'batched rate-limit admissions (PostgreSQL only; nothing on SQLite)',
  sql: `SELECT 1;`,
};
