// PostgreSQL twin of SQLite migration 20: task commands relayed to the replica holding a
// node's agent stream (see ../sqlite/agent-relay-migration.ts).
import type { Migration } from '../sqlite/migrations.js';
import { TEXT } from './schema-text.js';

export const AGENT_RELAY_MIGRATION: Migration = {
  version: 20,
  name: 'agent commands relayed to the replica holding the stream',
  sql: `
    CREATE TABLE agent_relay_commands (
      seq BIGSERIAL PRIMARY KEY,
      node_id ${TEXT} NOT NULL,
      command ${TEXT} NOT NULL,
      created_at BIGINT NOT NULL
    );
    CREATE INDEX agent_relay_commands_node ON agent_relay_commands(node_id, seq);
    CREATE INDEX agent_relay_commands_age ON agent_relay_commands(created_at);
  `,
};
