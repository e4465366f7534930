// Schema for the users of an org, the user a key belongs to, and the org's default pool.
// A removed user's row is deleted (the email may be invited again); its keys stay,
// revoked, and keep naming the user id, so api_keys.user_id has no foreign key.
import type { Migration } from './migrations.js';

export const USERS_MIGRATION: Migration = {
  version: 18,
  name: 'org users, key owners, org default pool',
  sql: `
    CREATE TABLE org_users (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL REFERENCES orgs(id),
      email TEXT NOT NULL,
      role TEXT NOT NULL CHECK (role IN ('admin', 'developer', 'billing', 'viewer')),
      status TEXT NOT NULL CHECK (status IN ('invited', 'active')),
      invited_by TEXT,
      created_at INTEGER NOT NULL,
      UNIQUE (org_id, email)
    );
    ALTER TABLE api_keys ADD COLUMN user_id TEXT;
    CREATE INDEX api_keys_user ON api_keys(user_id) WHERE user_id IS NOT NULL;
    ALTER TABLE orgs ADD COLUMN default_pool TEXT CHECK (default_pool IN ('na', 'eu', 'apac'));
  `,
};
