// Schema for model-server replicas (GPU claims use gpu_claims of migration 2, owner = replica id).
// Version 6: version 5 belongs to another feature branch.
import type { Migration } from './migrations.js';

export const REPLICAS_MIGRATION: Migration = {
  version: 6,
  name: 'model-server replicas',
  sql: `
    CREATE TABLE replicas (
      id TEXT PRIMARY KEY,
      model TEXT NOT NULL,
      quantization TEXT NOT NULL CHECK (quantization IN ('fp16', 'fp8', 'int4')),
      pool TEXT NOT NULL,
      node_id TEXT NOT NULL,
      gpu_uuids TEXT NOT NULL,
      engine TEXT NOT NULL,
      image TEXT NOT NULL,
      args TEXT NOT NULL,
      env TEXT NOT NULL,
      container_port INTEGER NOT NULL,
      health_path TEXT NOT NULL,
      status TEXT NOT NULL,
      endpoint TEXT,
      message TEXT NOT NULL DEFAULT '',
      restarts INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL,
      ready_at INTEGER,
      changed_at INTEGER NOT NULL,
      ended_at INTEGER
    );
    CREATE INDEX replicas_active ON replicas(ended_at, created_at);
    CREATE INDEX replicas_node ON replicas(node_id, status);
  `,
};
