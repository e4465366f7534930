// Org users, key owners and the org default pool: the twin of SQLite migration 18.
import { TEXT } from './schema-text.js';

export const USERS_SCHEMA = `
  CREATE TABLE org_users (
    id ${TEXT} PRIMARY KEY,
    org_id ${TEXT} NOT NULL REFERENCES orgs(id),
    email ${TEXT} NOT NULL,
    role ${TEXT} NOT NULL CHECK (role IN ('admin', 'developer', 'billing', 'viewer')),
    status ${TEXT} NOT NULL CHECK (status IN ('invited', 'active')),
    invited_by ${TEXT},
    created_at BIGINT NOT NULL,
    UNIQUE (org_id, email)
  );
  ALTER TABLE api_keys ADD COLUMN user_id ${TEXT};
  CREATE INDEX api_keys_user ON api_keys(user_id) WHERE user_id IS NOT NULL;
  ALTER TABLE orgs ADD COLUMN default_pool ${TEXT} CHECK (default_pool IN ('na', 'eu', 'apac'));
`;
