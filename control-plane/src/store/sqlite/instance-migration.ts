// Schema for instances, GPU claims and the charges ledger.
import type { Migration } from './migrations.js';

export const INSTANCES_MIGRATION: Migration = {
  version: 4,
  name: 'instances, their transitions, charges (GPU claims use gpu_claims of migration 2, owner = instance id)',
  sql: `
    CREATE TABLE instances (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL,
      key_id TEXT,
      status TEXT NOT NULL,
      failure_reason TEXT,
      sku TEXT NOT NULL,
      gpus INTEGER NOT NULL,
      pool TEXT NOT NULL,
      mode TEXT NOT NULL CHECK (mode IN ('on_demand', 'reserved')),
      duration_hours REAL,
      image TEXT NOT NULL,
      ssh_keys TEXT NOT NULL,
      labels TEXT NOT NULL,
      node_id TEXT,
      gpu_uuids TEXT NOT NULL,
      rate_micros INTEGER NOT NULL,
      progress TEXT,
      created_at INTEGER NOT NULL,
      ready_at INTEGER,
      expires_at INTEGER,
      terminated_at INTEGER,
      pending_stop TEXT,
      updated_at INTEGER NOT NULL
    );
    CREATE INDEX instances_org ON instances(org_id, created_at DESC, id DESC);
    CREATE INDEX instances_node ON instances(node_id, status);

    CREATE TABLE instance_transitions (
      instance_id TEXT NOT NULL,
      at INTEGER NOT NULL,
      from_status TEXT NOT NULL,
      to_status TEXT NOT NULL,
      reason TEXT
    );
    CREATE INDEX instance_transitions_instance ON instance_transitions(instance_id, at);

    CREATE TABLE charges (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL,
      instance_id TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('reservation', 'extension', 'on_demand')),
      amount_micros INTEGER NOT NULL,
      description TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );
    CREATE INDEX charges_org ON charges(org_id, created_at DESC, id DESC);
    CREATE INDEX charges_instance ON charges(instance_id);
  `,
};
