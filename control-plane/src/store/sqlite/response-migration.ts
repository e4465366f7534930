// Schema for stored Responses API responses (store: true), kept until expires_at.
import type { Migration } from './migrations.js';

export const RESPONSES_MIGRATION: Migration = {
  version: 14,
  name: 'stored responses (Responses API)',
  sql: `
    CREATE TABLE stored_responses (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL,
      response TEXT NOT NULL,
      history TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      expires_at INTEGER NOT NULL
    );
    CREATE INDEX stored_responses_expiry ON stored_responses(expires_at);
  `,
};
