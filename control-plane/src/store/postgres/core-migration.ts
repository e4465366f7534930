// Schema for orgs, API keys and their secrets, the events outbox and idempotency claims
// (SQLite migrations 1 and 13, in their final form).
import { TEXT } from './schema-text.js';

export const CORE_SCHEMA = `
  CREATE TABLE orgs (
    id ${TEXT} PRIMARY KEY,
    name ${TEXT} NOT NULL UNIQUE,
    tier INTEGER NOT NULL DEFAULT 2 CHECK (tier IN (2, 3)),
    ip_allowlist ${TEXT} NOT NULL DEFAULT '[]',
    referrer_allowlist ${TEXT} NOT NULL DEFAULT '[]',
    allowed_models ${TEXT},
    created_at BIGINT NOT NULL
  );

  CREATE TABLE api_keys (
    id ${TEXT} PRIMARY KEY,
    org_id ${TEXT} NOT NULL REFERENCES orgs(id),
    name ${TEXT},
    kind ${TEXT} NOT NULL CHECK (kind IN ('live', 'test', 'public')),
    admin BOOLEAN NOT NULL DEFAULT FALSE,
    scopes ${TEXT} NOT NULL,
    prefix ${TEXT} NOT NULL,
    last4 ${TEXT} NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
  );
  CREATE INDEX api_keys_org ON api_keys(org_id);

  CREATE TABLE api_key_secrets (
    hash BYTEA PRIMARY KEY,
    key_id ${TEXT} NOT NULL REFERENCES api_keys(id),
    last4 ${TEXT} NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
  );
  CREATE INDEX api_key_secrets_key ON api_key_secrets(key_id);

  CREATE TABLE events (
    seq BIGSERIAL PRIMARY KEY,
    id ${TEXT} NOT NULL UNIQUE,
    type ${TEXT} NOT NULL,
    org_id ${TEXT},
    subject ${TEXT},
    data ${TEXT} NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX events_type ON events(type, seq);

  CREATE TABLE idempotency_records (
    key_id ${TEXT} NOT NULL,
    idem_key ${TEXT} NOT NULL,
    request_hash ${TEXT} NOT NULL,
    state ${TEXT} NOT NULL CHECK (state IN ('in_progress', 'completed')),
    owner ${TEXT} NOT NULL,
    claim ${TEXT} NOT NULL,
    lease_until BIGINT NOT NULL,
    status_code INTEGER,
    headers ${TEXT},
    body ${TEXT},
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (key_id, idem_key)
  );
  CREATE INDEX idempotency_expiry ON idempotency_records(expires_at);
  CREATE INDEX idempotency_owner ON idempotency_records(owner) WHERE state = 'in_progress';
`;
