// PostgreSQL twin of SQLite migration 25: an org's own GPU quota (see
// ../sqlite/gpu-quota-migration.ts).
import type { Migration } from '../sqlite/migrations.js';

export const GPU_QUOTA_MIGRATION: Migration = {
  version: 25,
  name: "orgs: the provider's GPU quota per org",
  sql: `ALTER TABLE orgs ADD COLUMN gpu_quota INTEGER CHECK (gpu_quota IS NULL OR gpu_quota >= 0);`,
};
