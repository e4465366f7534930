// Schema for model-server replicas (SQLite migration 6); GPU claims are gpu_claims rows
// owned by the replica id.
import { TEXT } from './schema-text.js';

export const REPLICA_SCHEMA = `
  CREATE TABLE replicas (
    id ${TEXT} PRIMARY KEY,
    model ${TEXT} NOT NULL,
    quantization ${TEXT} NOT NULL CHECK (quantization IN ('fp16', 'fp8', 'int4')),
    pool ${TEXT} NOT NULL,
    node_id ${TEXT} NOT NULL,
    gpu_uuids ${TEXT} NOT NULL,
    engine ${TEXT} NOT NULL,
    image ${TEXT} NOT NULL,
    args ${TEXT} NOT NULL,
    env ${TEXT} NOT NULL,
    container_port INTEGER NOT NULL,
    health_path ${TEXT} NOT NULL,
    status ${TEXT} NOT NULL,
    endpoint ${TEXT},
    message ${TEXT} NOT NULL DEFAULT '',
    restarts INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    ready_at BIGINT,
    changed_at BIGINT NOT NULL,
    ended_at BIGINT
  );
  CREATE INDEX replicas_active ON replicas(ended_at, created_at);
  CREATE INDEX replicas_node ON replicas(node_id, status);
`;
