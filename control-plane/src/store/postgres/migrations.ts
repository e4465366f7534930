// Versioned PostgreSQL migrations. Version 13 creates the schema SQLite has after its
// migration 13, in one step (PostgreSQL has no older databases to carry forward); every
// later SQLite migration gets a twin here with the same number, so one number means
// one schema on both engines. Never edit a released migration: add a new one.
import type pg from 'pg';
import type { Migration } from '../sqlite/migrations.js';
import { CORE_SCHEMA } from './core-migration.js';
import { NODE_SCHEMA } from './node-migration.js';
import { WEBHOOK_SCHEMA } from './webhook-migration.js';
import { INSTANCE_SCHEMA } from './instance-migration.js';
import { REPLICA_SCHEMA } from './replica-migration.js';
import { USAGE_SCHEMA } from './usage-migration.js';
import { OPERATOR_SCHEMA } from './operator-migration.js';
import { RESPONSES_MIGRATION } from './response-migration.js';
import { REMEDIATION_MIGRATION } from './remediation-migration.js';
import { LEDGER_MIGRATION } from './ledger-migration.js';
import { USERS_SCHEMA } from './user-migration.js';
import { SHARED_STATE_MIGRATION } from './shared-state-migration.js';
import { AGENT_RELAY_MIGRATION } from './agent-relay-migration.js';
import { USAGE_APPEND_ONLY_MIGRATION } from './usage-append-only-migration.js';
import { ACCRUAL_MIGRATION } from './accrual-migration.js';
import { AUDIT_TARGET_MIGRATION } from './audit-target-migration.js';
import { BATCHED_LIMITS_MIGRATION } from './batched-limits-migration.js';
import { GPU_QUOTA_MIGRATION } from './gpu-quota-migration.js';

export type { Migration };

export const PG_MIGRATIONS: Migration[] = [
  {
    version: 13,
    name: 'baseline: orgs, keys, events, idempotency, node registry, webhooks, instances, replicas, usage',
    sql: [CORE_SCHEMA, NODE_SCHEMA, WEBHOOK_SCHEMA, INSTANCE_SCHEMA, REPLICA_SCHEMA, USAGE_SCHEMA].join('\n'),
  },
  RESPONSES_MIGRATION,
  { version: 15, name: 'operator keys and the operator audit trail', sql: OPERATOR_SCHEMA },
  REMEDIATION_MIGRATION,
  LEDGER_MIGRATION,
  { version: 18, name: 'org users, key owners, org default pool', sql: USERS_SCHEMA },
  SHARED_STATE_MIGRATION,
  AGENT_RELAY_MIGRATION,
  USAGE_APPEND_ONLY_MIGRATION,
  ACCRUAL_MIGRATION,
  AUDIT_TARGET_MIGRATION,
  BATCHED_LIMITS_MIGRATION,
  GPU_QUOTA_MIGRATION,
];

/** The advisory lock replicas take while migrating: one migrates, the others wait and find nothing left. */
export const MIGRATION_LOCK = 0x5356_4d31; // "SVM1"

/**
 * Applies every migration not recorded yet (not just those above the newest: branches
 * merged side by side may leave a lower version unapplied), each in its own
 * transaction, while holding a session advisory lock. Returns the newest version.
 */
export async function applyPgMigrations(client: pg.ClientBase, migrations: Migration[]): Promise<number> {
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
    const applied = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r: { version: number }) => r.version));
    const pending = [...migrations].sort((a, b) => a.version - b.version).filter((m) => !applied.has(m.version));
    for (const migration of pending) {
      await client.query('BEGIN');
      try {
        await client.query(migration.sql);
        await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
          migration.version,
          migration.name,
          Date.now(),
        ]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    }
    return Math.max(0, ...applied, ...pending.map((m) => m.version));
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
  }
}
