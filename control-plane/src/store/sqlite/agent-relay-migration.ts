// Schema for task commands relayed between control-plane replicas: a replica that has a
// command for a node whose agent stream another replica holds queues it here; the
// holder takes it (oldest first) and writes it into the stream. Only PostgreSQL
// deployments have several replicas; SQLite gets the same table so one number means one
// schema on both engines.
import type { Migration } from './migrations.js';

export const AGENT_RELAY_MIGRATION: Migration = {
  version: 20,
  name: 'agent commands relayed to the replica holding the stream',
  sql: `
    CREATE TABLE agent_relay_commands (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,
      node_id TEXT NOT NULL,
      command TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );
    CREATE INDEX agent_relay_commands_node ON agent_relay_commands(node_id, seq);
    CREATE INDEX agent_relay_commands_age ON agent_relay_commands(created_at);
  `,
};
