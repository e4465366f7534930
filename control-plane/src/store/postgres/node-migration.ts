// Schema for the node registry: enrollment tokens, nodes, GPUs, the health timeline,
// node commands and GPU claims (SQLite migrations 2 and 12's forgotten_at).
import { TEXT } from './schema-text.js';

export const NODE_SCHEMA = `
  CREATE TABLE node_enrollment_tokens (
    id ${TEXT} PRIMARY KEY,
    hash BYTEA NOT NULL UNIQUE,
    pool ${TEXT},
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    used_by_node ${TEXT},
    revoked_at BIGINT
  );

  CREATE TABLE nodes (
    id ${TEXT} PRIMARY KEY,
    secret_hash BYTEA NOT NULL,
    hostname ${TEXT} NOT NULL,
    pool ${TEXT} NOT NULL,
    status ${TEXT} NOT NULL CHECK (status IN ('enrolled', 'ready', 'unreachable')),
    cordoned BOOLEAN NOT NULL DEFAULT FALSE,
    draining BOOLEAN NOT NULL DEFAULT FALSE,
    host_facts ${TEXT},
    agent_version ${TEXT} NOT NULL DEFAULT '',
    protocol_version INTEGER NOT NULL DEFAULT 0,
    enrolled_at BIGINT NOT NULL,
    connected_at BIGINT,
    last_seen_at BIGINT,
    forgotten_at BIGINT
  );

  CREATE TABLE node_gpus (
    uuid ${TEXT} PRIMARY KEY,
    node_id ${TEXT} NOT NULL REFERENCES nodes(id),
    gpu_index INTEGER NOT NULL,
    name ${TEXT} NOT NULL,
    memory_total_bytes BIGINT,
    healthy BOOLEAN NOT NULL DEFAULT TRUE,
    health_reason ${TEXT} NOT NULL DEFAULT '',
    sample ${TEXT},
    sampled_at BIGINT
  );
  CREATE INDEX node_gpus_node ON node_gpus(node_id, gpu_index);

  CREATE TABLE node_health_events (
    seq BIGSERIAL PRIMARY KEY,
    node_id ${TEXT} NOT NULL REFERENCES nodes(id),
    gpu_uuid ${TEXT},
    gpu_index INTEGER,
    kind ${TEXT} NOT NULL,
    xid INTEGER,
    healthy BOOLEAN,
    message ${TEXT} NOT NULL DEFAULT '',
    at BIGINT NOT NULL
  );
  CREATE INDEX node_health_events_node ON node_health_events(node_id, seq);
  CREATE INDEX node_health_events_xid ON node_health_events(gpu_uuid, seq) WHERE kind = 'xid';

  CREATE TABLE node_commands (
    id ${TEXT} PRIMARY KEY,
    node_id ${TEXT} NOT NULL REFERENCES nodes(id),
    kind ${TEXT} NOT NULL,
    args ${TEXT} NOT NULL,
    state ${TEXT} NOT NULL CHECK (state IN ('pending', 'sent', 'succeeded', 'failed')),
    created_at BIGINT NOT NULL,
    sent_at BIGINT,
    finished_at BIGINT,
    error_code ${TEXT},
    error_message ${TEXT}
  );
  CREATE INDEX node_commands_pending ON node_commands(state, created_at);

  CREATE TABLE gpu_claims (
    gpu_uuid ${TEXT} PRIMARY KEY,
    node_id ${TEXT} NOT NULL,
    owner ${TEXT} NOT NULL,
    claimed_at BIGINT NOT NULL
  );
  CREATE INDEX gpu_claims_owner ON gpu_claims(owner);
`;
