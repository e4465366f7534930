// Versioned schema migrations, applied in order at start-up inside one transaction each.
// Never edit a released migration: add a new one.

import { ACCESS_MIGRATION } from './access-migration.js';
import { BILLING_INTEGRITY_MIGRATION } from './billing-integrity-migration.js';
import { INSTANCES_MIGRATION } from './instance-migration.js';
import { USAGE_MIGRATION } from './usage-migration.js';
import { REPLICAS_MIGRATION } from './replica-migration.js';
import { IDEMPOTENCY_LEASE_MIGRATION } from './idempotency-migration.js';
import { LEDGER_MIGRATION } from './ledger-migration.js';
import { RESPONSES_MIGRATION } from './response-migration.js';
import { REMEDIATION_MIGRATION } from './remediation-migration.js';
import { OPERATORS_MIGRATION } from './operator-migration.js';
import { USERS_MIGRATION } from './user-migration.js';
import { SHARED_STATE_MIGRATION } from './shared-state-migration.js';
import { AGENT_RELAY_MIGRATION } from './agent-relay-migration.js';
import { USAGE_APPEND_ONLY_MIGRATION } from './usage-append-only-migration.js';
import { ACCRUAL_MIGRATION } from './accrual-migration.js';
import { AUDIT_TARGET_MIGRATION } from './audit-target-migration.js';
import { BATCHED_LIMITS_MIGRATION } from './batched-limits-migration.js';
import { GPU_QUOTA_MIGRATION } from './gpu-quota-migration.js';

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
  {
    version: 2,
    name: 'node registry: enrollment tokens, nodes, gpus, health timeline, node commands, gpu claims',
    sql: `
      CREATE TABLE node_enrollment_tokens (
        id TEXT PRIMARY KEY,
        hash BLOB NOT NULL UNIQUE,
        pool TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        used_at INTEGER,
        used_by_node TEXT,
        revoked_at INTEGER
      );

      CREATE TABLE nodes (
        id TEXT PRIMARY KEY,
        secret_hash BLOB NOT NULL,
        hostname TEXT NOT NULL,
        pool TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('enrolled', 'ready', 'unreachable')),
        cordoned INTEGER NOT NULL DEFAULT 0,
        draining INTEGER NOT NULL DEFAULT 0,
        host_facts TEXT,
        agent_version TEXT NOT NULL DEFAULT '',
        protocol_version INTEGER NOT NULL DEFAULT 0,
        enrolled_at INTEGER NOT NULL,
        connected_at INTEGER,
        last_seen_at INTEGER
      );

      CREATE TABLE node_gpus (
        uuid TEXT PRIMARY KEY,
        node_id TEXT NOT NULL REFERENCES nodes(id),
        gpu_index INTEGER NOT NULL,
        name TEXT NOT NULL,
        memory_total_bytes INTEGER,
        healthy INTEGER NOT NULL DEFAULT 1,
        health_reason TEXT NOT NULL DEFAULT '',
        sample TEXT,
        sampled_at INTEGER
      );
      CREATE INDEX node_gpus_node ON node_gpus(node_id, gpu_index);

      CREATE TABLE node_health_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        node_id TEXT NOT NULL REFERENCES nodes(id),
        gpu_uuid TEXT,
        gpu_index INTEGER,
        kind TEXT NOT NULL,
        xid INTEGER,
        healthy INTEGER,
        message TEXT NOT NULL DEFAULT '',
        at INTEGER NOT NULL
      );
      CREATE INDEX node_health_events_node ON node_health_events(node_id, seq);

      CREATE TABLE node_commands (
        id TEXT PRIMARY KEY,
        node_id TEXT NOT NULL REFERENCES nodes(id),
        kind TEXT NOT NULL,
        args TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'succeeded', 'failed')),
        created_at INTEGER NOT NULL,
        sent_at INTEGER,
        finished_at INTEGER,
        error_code TEXT,
        error_message TEXT
      );
      CREATE INDEX node_commands_pending ON node_commands(state, created_at);

      CREATE TABLE gpu_claims (
        gpu_uuid TEXT PRIMARY KEY,
        node_id TEXT NOT NULL,
        owner TEXT NOT NULL,
        claimed_at INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX gpu_claims_owner ON gpu_claims(owner);
    `,
  },
  {
    version: 3,
    name: 'webhook subscriptions, secrets, deliveries, attempts, fan-out cursor, deprecation announcements',
    sql: `
      CREATE TABLE webhook_subscriptions (
        id TEXT PRIMARY KEY,
        org_id TEXT NOT NULL REFERENCES orgs(id),
        url TEXT NOT NULL,
        event_types TEXT NOT NULL,
        description TEXT,
        status TEXT NOT NULL CHECK (status IN ('enabled', 'disabled')),
        disabled_reason TEXT,
        created_at INTEGER NOT NULL,
        from_seq INTEGER NOT NULL
      );
      CREATE INDEX webhook_subscriptions_org ON webhook_subscriptions(org_id, created_at);

      -- Secrets are kept as they are: HMAC signing needs the value, not a hash.
      CREATE TABLE webhook_secrets (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        subscription_id TEXT NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
        secret TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER
      );
      CREATE INDEX webhook_secrets_subscription ON webhook_secrets(subscription_id);

      CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        subscription_id TEXT NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
        event_seq INTEGER NOT NULL REFERENCES events(seq),
        subject TEXT,
        status TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
        attempt_count INTEGER NOT NULL DEFAULT 0,
        failed_in_run INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER,
        created_at INTEGER NOT NULL,
        finished_at INTEGER,
        UNIQUE (subscription_id, event_seq)
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt_at);
      CREATE INDEX webhook_deliveries_chain ON webhook_deliveries(subscription_id, subject, status, event_seq);

      CREATE TABLE webhook_attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        status_code INTEGER,
        error TEXT,
        next_attempt_at INTEGER
      );
      CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, attempt);

      -- The outbox cursor: the last events.seq fanned out to deliveries.
      CREATE TABLE webhook_fan_out_cursor (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        last_seq INTEGER NOT NULL
      );
      -- Starts at the newest event: nothing older than the feature has a subscription.
      INSERT INTO webhook_fan_out_cursor (id, last_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM events;

      CREATE TABLE model_deprecation_announcements (
        model_id TEXT NOT NULL,
        shutdown_at TEXT NOT NULL,
        event_id TEXT NOT NULL,
        PRIMARY KEY (model_id, shutdown_at)
      ) WITHOUT ROWID;
    `,
  },
  INSTANCES_MIGRATION,
  ACCESS_MIGRATION,
  REPLICAS_MIGRATION,
  USAGE_MIGRATION,
  BILLING_INTEGRITY_MIGRATION,
  IDEMPOTENCY_LEASE_MIGRATION,
  LEDGER_MIGRATION,
  RESPONSES_MIGRATION,
  REMEDIATION_MIGRATION,
  OPERATORS_MIGRATION,
  USERS_MIGRATION,
  SHARED_STATE_MIGRATION,
  AGENT_RELAY_MIGRATION,
  USAGE_APPEND_ONLY_MIGRATION,
  ACCRUAL_MIGRATION,
  AUDIT_TARGET_MIGRATION,
  BATCHED_LIMITS_MIGRATION,
  GPU_QUOTA_MIGRATION,
];
