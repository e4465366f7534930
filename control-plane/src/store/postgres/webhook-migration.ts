// Schema for webhook subscriptions, secrets, deliveries, attempts, the fan-out cursor
// and announced deprecations (SQLite migration 3).
import { TEXT } from './schema-text.js';

export const WEBHOOK_SCHEMA = `
  CREATE TABLE webhook_subscriptions (
    id ${TEXT} PRIMARY KEY,
    org_id ${TEXT} NOT NULL REFERENCES orgs(id),
    url ${TEXT} NOT NULL,
    event_types ${TEXT} NOT NULL,
    description ${TEXT},
    status ${TEXT} NOT NULL CHECK (status IN ('enabled', 'disabled')),
    disabled_reason ${TEXT},
    created_at BIGINT NOT NULL,
    from_seq BIGINT NOT NULL
  );
  CREATE INDEX webhook_subscriptions_org ON webhook_subscriptions(org_id, created_at);

  -- Secrets are kept as they are: HMAC signing needs the value, not a hash.
  CREATE TABLE webhook_secrets (
    id BIGSERIAL PRIMARY KEY,
    subscription_id ${TEXT} NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
    secret ${TEXT} NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
  );
  CREATE INDEX webhook_secrets_subscription ON webhook_secrets(subscription_id);

  CREATE TABLE webhook_deliveries (
    id ${TEXT} PRIMARY KEY,
    subscription_id ${TEXT} NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
    event_seq BIGINT NOT NULL REFERENCES events(seq),
    subject ${TEXT},
    status ${TEXT} NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempt_count INTEGER NOT NULL DEFAULT 0,
    failed_in_run INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    created_at BIGINT NOT NULL,
    finished_at BIGINT,
    UNIQUE (subscription_id, event_seq)
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt_at);
  CREATE INDEX webhook_deliveries_chain ON webhook_deliveries(subscription_id, subject, status, event_seq);

  CREATE TABLE webhook_attempts (
    id BIGSERIAL PRIMARY KEY,
    delivery_id ${TEXT} NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    started_at BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    status_code INTEGER,
    error ${TEXT},
    next_attempt_at BIGINT
  );
  CREATE INDEX webhook_attempts_delivery ON webhook_attempts(delivery_id, attempt);

  -- The outbox cursor: the last events.seq fanned out to deliveries.
  CREATE TABLE webhook_fan_out_cursor (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq BIGINT NOT NULL
  );
  INSERT INTO webhook_fan_out_cursor (id, last_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM events;

  CREATE TABLE model_deprecation_announcements (
    model_id ${TEXT} NOT NULL,
    shutdown_at ${TEXT} NOT NULL,
    event_id ${TEXT} NOT NULL,
    PRIMARY KEY (model_id, shutdown_at)
  );
`;
