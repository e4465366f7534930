// Version 19: the per-key rate-limit rows that replicas on PostgreSQL share. SQLite is one
// process and keeps its buckets in memory (pipeline/rate-limit.ts), so it never writes
// this table; it exists so both engines keep one schema (the contract suite compares them).
import type { Migration } from './migrations.js';

export const SHARED_STATE_MIGRATION: Migration = {
  version: 19,
  name: 'shared rate-limit state and change notices',
  sql: `
    CREATE TABLE rate_limits (
      key_id TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('requests', 'tokens')),
      tat REAL NOT NULL,
      admitted INTEGER NOT NULL DEFAULT 1,
      PRIMARY KEY (key_id, kind)
    ) WITHOUT ROWID;
  `,
};
