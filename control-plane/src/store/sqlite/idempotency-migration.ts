// Idempotency claims that survive a crash: a claim names the process that holds it and
// a lease that process renews, so a claim whose process died can be taken over; the
// answer is written with the work it answers (see idempotency-store.ts).
// Version 13 (not the next free number): other branches add migrations side by side,
// and every version not yet recorded is applied, whatever its number.
import type { Migration } from './migrations.js';

export const IDEMPOTENCY_LEASE_MIGRATION: Migration = {
  version: 13,
  name: 'idempotency claims with an owner process and a lease; stored answers without secrets',
  sql: `
    -- Answers stored by earlier versions may hold API key values and webhook secrets in
    -- plaintext. They are a 5-minute replay cache: drop them rather than keep a secret.
    DROP TABLE idempotency_records;
    CREATE TABLE idempotency_records (
      key_id TEXT NOT NULL,
      idem_key TEXT NOT NULL,
      request_hash TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
      owner TEXT NOT NULL,
      claim TEXT NOT NULL,
      lease_until INTEGER NOT NULL,
      status_code INTEGER,
      headers TEXT,
      body TEXT,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL,
      PRIMARY KEY (key_id, idem_key)
    ) WITHOUT ROWID;
    CREATE INDEX idempotency_expiry ON idempotency_records(expires_at);
    CREATE INDEX idempotency_owner ON idempotency_records(owner) WHERE state = 'in_progress';
  `,
};
