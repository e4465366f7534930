// Schema for inference usage records and the sandbox keys' daily token counters.
import type { Migration } from './migrations.js';

export const USAGE_MIGRATION: Migration = {
  version: 7,
  name: 'inference usage records, sandbox daily token counters',
  sql: `
    CREATE TABLE usage_records (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL,
      key_id TEXT NOT NULL,
      request_id TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('chat', 'embeddings')),
      model TEXT NOT NULL,
      quantization TEXT NOT NULL,
      pool TEXT NOT NULL,
      prompt_tokens INTEGER NOT NULL,
      completion_tokens INTEGER NOT NULL,
      cost_nanos INTEGER NOT NULL,
      user TEXT,
      sandbox INTEGER NOT NULL,
      created_at INTEGER NOT NULL
    );
    CREATE INDEX usage_records_org ON usage_records(org_id, created_at, id);

    CREATE TABLE sandbox_tokens (
      key_id TEXT NOT NULL,
      day TEXT NOT NULL,
      tokens INTEGER NOT NULL,
      PRIMARY KEY (key_id, day)
    ) WITHOUT ROWID;
  `,
};
