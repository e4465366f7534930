// GPU remediation state (control-plane/src/remediation): version 16, assigned to this
// feature while other branches add their own side by side. The cursor starts at the
// newest timeline row, so history from before the upgrade is not acted on again.
import type { Migration } from './migrations.js';

export const REMEDIATION_MIGRATION: Migration = {
  version: 16,
  name: 'GPU remediations and their cursor over the health timeline',
  sql: `
    CREATE TABLE gpu_remediations (
      id TEXT PRIMARY KEY,
      node_id TEXT NOT NULL REFERENCES nodes(id),
      gpu_uuid TEXT,
      gpu_index INTEGER,
      xid INTEGER,
      action TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('drain_gpu', 'reset_gpu', 'reboot_node')),
      stage TEXT NOT NULL CHECK (stage IN ('waiting_idle', 'resetting', 'held', 'node_drained', 'closed')),
      fault TEXT NOT NULL,
      detail TEXT NOT NULL,
      command_id TEXT,
      holders TEXT NOT NULL DEFAULT '[]',
      trigger_seq INTEGER NOT NULL,
      opened_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      closed_at INTEGER,
      outcome TEXT
    );
    CREATE INDEX gpu_remediations_open ON gpu_remediations(stage) WHERE stage <> 'closed';
    CREATE INDEX gpu_remediations_node ON gpu_remediations(node_id, opened_at);
    CREATE INDEX gpu_remediations_gpu ON gpu_remediations(gpu_uuid, opened_at);
    CREATE TABLE remediation_cursor (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      seq INTEGER NOT NULL
    );
    INSERT INTO remediation_cursor (id, seq) SELECT 1, COALESCE(MAX(seq), 0) FROM node_health_events;
  `,
};
