// Operator identity: keys of the people who run the fleet (not of any org) and the audit
// trail of what each of them changed. Audit rows live apart from `events` on purpose:
// events fan out to customers' webhooks, and an operator's actions are not theirs to see.
import type { Migration } from './migrations.js';

export const OPERATORS_MIGRATION: Migration = {
  version: 15,
  name: 'operator keys and the operator audit trail',
  sql: `
    CREATE TABLE operator_keys (
      id TEXT PRIMARY KEY,
      name TEXT,
      scopes TEXT NOT NULL,
      hash BLOB NOT NULL UNIQUE,
      last4 TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      created_by TEXT NOT NULL,
      revoked_at INTEGER
    );

    CREATE TABLE operator_audit (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      at INTEGER NOT NULL,
      actor TEXT NOT NULL,
      action TEXT NOT NULL,
      target TEXT,
      detail TEXT NOT NULL
    );
  `,
};
