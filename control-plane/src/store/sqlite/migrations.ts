// Versioned schema migrations, applied in order at start-up inside one transaction each.
// Never edit a released migration: add a new one.

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'orgs, api keys, events, idempotency',
    sql: `
      CREATE TABLE orgs (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        tier INTEGER NOT NULL DEFAULT 2 CHECK (tier IN (2, 3)),
        ip_allowlist TEXT NOT NULL DEFAULT '[]',
        referrer_allowlist TEXT NOT NULL DEFAULT '[]',
        allowed_models TEXT,
        created_at INTEGER NOT NULL
      );

      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES orgs(id),
        name TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('live', 'test', 'public')),
        admin INTEGER NOT NULL DEFAULT 0,
        scopes TEXT NOT NULL,
        prefix TEXT NOT NULL,
        last4 TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      );
      CREATE INDEX api_keys_org ON api_keys(org_id);

      CREATE TABLE api_key_secrets (
        hash BLOB PRIMARY KEY,
        key_id TEXT NOT NULL REFERENCES api_keys(id),
        last4 TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER
      ) WITHOUT ROWID;
      CREATE INDEX api_key_secrets_key ON api_key_secrets(key_id);

      CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        org_id TEXT,
        subject TEXT,
        data TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX events_type ON events(type, seq);

      CREATE TABLE idempotency_records (
        key_id TEXT NOT NULL,
        idem_key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),
        status_code INTEGER,
        headers TEXT,
        body TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (key_id, idem_key)
      ) WITHOUT ROWID;
      CREATE INDEX idempotency_expiry ON idempotency_records(expires_at);
    `,
  },
];
