// SQLite implementation of the store (better-sqlite3, WAL). better-sqlite3 is
// synchronous; the async interface keeps callers ready for a networked engine.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type {
  ApiKeyRecord,
  EventRecord,
  KeyKind,
  KeySecretRecord,
  OrgRecord,
  StoredEvent,
} from '../records.js';
import type { ActiveKeyCounts, EventStore, IdempotencyStore, KeyStore, OrgStore, Store } from '../store.js';
import { addAppendListener, insertEvent, toEvent } from './event-rows.js';
import { MIGRATIONS, type Migration } from './migrations.js';
import { checkpointInBackground, type BackgroundCheckpoints } from './background-checkpoints.js';
import { SqliteIdempotencyStore } from './idempotency-store.js';
import { SqliteNodeStore } from './node-store.js';
import type { NodeStore } from '../node-store.js';
import type { WebhookStore } from '../../webhooks/webhook-store.js';
import { SqliteWebhookStore } from './webhook-store.js';
import { SqliteInstanceStore } from './instance-store.js';
import type { InstanceStore } from '../instance-store.js';
import type { UsageStore } from '../usage-store.js';
import { SqliteUsageStore } from './usage-store.js';
import { SqliteReplicaStore } from './replica-store.js';
import type { ReplicaStore } from '../replica-store.js';
import type { LedgerStore } from '../ledger-store.js';
import { SqliteLedgerStore } from './ledger-store.js';
import type { ResponseStore } from '../response-store.js';
import { SqliteResponseStore } from './response-store.js';
import type { RemediationStore } from '../remediation-store.js';
import { SqliteRemediationStore } from './remediation-store.js';
import type { OperatorStore } from '../operator-store.js';
import { SqliteOperatorStore } from './operator-store.js';
import type { UserRecord, UserStore } from '../user-store.js';
import { SqliteUserStore, toUser } from './user-store.js';

type Row = Record<string, unknown>;
type Db = Database.Database;

export const DATABASE_FILE = 'control-plane.sqlite';

export interface SqliteStoreOptions {
  migrations?: Migration[];
  /**
   * Checkpoint the WAL in a worker thread instead of inside commits (the server: a
   * checkpoint's fsync would stall the event loop). Short-lived processes such as svcctl
   * leave SQLite's automatic checkpoints on.
   */
  backgroundCheckpoints?: { everyMs: number; onError: (message: string) => void };
}

export function openSqliteStore(dataDir: string, options: SqliteStoreOptions = {}): SqliteStore {
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(join(dataDir, DATABASE_FILE));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  // The CLI and the server share the file; wait for each other's short writes.
  db.pragma('busy_timeout = 5000');
  applyMigrations(db, options.migrations ?? MIGRATIONS);
  const store = new SqliteStore(db);
  if (options.backgroundCheckpoints) store.checkpoints = checkpointInBackground(db, options.backgroundCheckpoints);
  return store;
}

export function applyMigrations(db: Db, migrations: Migration[]): number {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  // Every migration not recorded yet, not just those above the newest: branches that
  // added migrations side by side may have left a lower version unapplied.
  const applied = new Set((db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>).map((r) => r.version));
  const current = Math.max(0, ...applied);
  const pending = [...migrations].sort((a, b) => a.version - b.version).filter((m) => !applied.has(m.version));
  for (const migration of pending) {
    db.transaction(() => {
      db.exec(migration.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        migration.version,
        migration.name,
        Date.now(),
      );
    }).immediate();
  }
  return Math.max(current, ...pending.map((m) => m.version));
}

const json = (value: unknown): string => JSON.stringify(value);

/** An org patch as the columns it sets (lists as JSON text); PostgreSQL's store writes the same columns. */
export function orgPatchColumns(patch: Parameters<OrgStore['update']>[1]): Record<string, unknown> {
  const columns: Record<string, unknown> = {};
  if (patch.defaultPool !== undefined) columns.default_pool = patch.defaultPool;
  if (patch.gpuQuota !== undefined) columns.gpu_quota = patch.gpuQuota;
  if (patch.name !== undefined) columns.name = patch.name;
  if (patch.tier !== undefined) columns.tier = patch.tier;
  if (patch.ipAllowlist !== undefined) columns.ip_allowlist = json(patch.ipAllowlist);
  if (patch.referrerAllowlist !== undefined) columns.referrer_allowlist = json(patch.referrerAllowlist);
  if (patch.allowedModels !== undefined) columns.allowed_models = patch.allowedModels === null ? null : json(patch.allowedModels);
  return columns;
}
const parse = <T>(text: unknown): T => JSON.parse(String(text)) as T;

export function toOrg(row: Row): OrgRecord {
  return {
    id: String(row.id),
    name: String(row.name),
    tier: Number(row.tier) as 2 | 3,
    ipAllowlist: parse<string[]>(row.ip_allowlist),
    referrerAllowlist: parse<string[]>(row.referrer_allowlist),
    allowedModels: row.allowed_models === null ? null : parse<string[]>(row.allowed_models),
    // Present only when set, so records compare equal to ones built before the field existed.
    ...(row.default_pool == null ? {} : { defaultPool: String(row.default_pool) as NonNullable<OrgRecord['defaultPool']> }),
    ...(row.gpu_quota == null ? {} : { gpuQuota: Number(row.gpu_quota) }),
    createdAt: Number(row.created_at),
  };
}

export function toKey(row: Row): ApiKeyRecord {
  return {
    id: String(row.id),
    orgId: String(row.org_id),
    name: row.name === null ? null : String(row.name),
    kind: String(row.kind) as KeyKind,
    admin: Number(row.admin) === 1,
    scopes: parse<string[]>(row.scopes),
    prefix: String(row.prefix),
    last4: String(row.last4),
    createdAt: Number(row.created_at),
    revokedAt: row.revoked_at === null ? null : Number(row.revoked_at),
    ...(row.user_id == null ? {} : { userId: String(row.user_id) }),
  };
}

export function toSecret(row: Row): KeySecretRecord {
  return {
    hash: row.hash as Buffer,
    keyId: String(row.key_id),
    last4: String(row.last4),
    createdAt: Number(row.created_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
  };
}

class SqliteOrgStore implements OrgStore {
  constructor(private readonly db: Db) {}

  async create(org: OrgRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO orgs (id, name, tier, ip_allowlist, referrer_allowlist, allowed_models, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        org.id,
        org.name,
        org.tier,
        json(org.ipAllowlist),
        json(org.referrerAllowlist),
        org.allowedModels === null ? null : json(org.allowedModels),
        org.createdAt,
      );
  }

  async get(id: string): Promise<OrgRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM orgs WHERE id = ?').get(id) as Row | undefined;
    return row && toOrg(row);
  }

  async getByName(name: string): Promise<OrgRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM orgs WHERE name = ?').get(name) as Row | undefined;
    return row && toOrg(row);
  }

  async list(): Promise<OrgRecord[]> {
    return (this.db.prepare('SELECT * FROM orgs ORDER BY created_at, id').all() as Row[]).map(toOrg);
  }

  async update(
    id: string,
    patch: Partial<Pick<OrgRecord, 'name' | 'tier' | 'ipAllowlist' | 'referrerAllowlist' | 'allowedModels' | 'defaultPool'>>,
  ): Promise<OrgRecord | undefined> {
    const columns = orgPatchColumns(patch);
    const names = Object.keys(columns);
    if (names.length > 0) {
      this.db
        .prepare(`UPDATE orgs SET ${names.map((n) => `${n} = @${n}`).join(', ')} WHERE id = @id`)
        .run({ ...columns, id });
    }
    return this.get(id);
  }
}

class SqliteKeyStore implements KeyStore {
  private readonly bySecret;

  constructor(private readonly db: Db) {
    // The hot path of every request: one indexed lookup, prepared once.
    this.bySecret = db.prepare(
      `SELECT s.hash, s.key_id, s.last4 AS secret_last4, s.created_at AS secret_created_at, s.expires_at,
              k.* FROM api_key_secrets s JOIN api_keys k ON k.id = s.key_id WHERE s.hash = ?`,
    );
  }

  async create(
    key: ApiKeyRecord,
    secret: KeySecretRecord,
    mayOwn?: (owner: UserRecord | undefined) => void,
    mayAdd?: (active: ActiveKeyCounts) => void,
  ): Promise<void> {
    this.db.transaction(() => {
      if (key.userId && mayOwn) {
        const row = this.db.prepare('SELECT * FROM org_users WHERE id = ?').get(key.userId) as Row | undefined;
        mayOwn(row && toUser(row));
      }
      // .immediate(): the write lock is held from here, so creates are counted one at a time.
      if (mayAdd) mayAdd(this.activeCounts(key.orgId));
      this.db
        .prepare(
          `INSERT INTO api_keys (id, org_id, name, kind, admin, scopes, prefix, last4, created_at, revoked_at, user_id)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(key.id, key.orgId, key.name, key.kind, key.admin ? 1 : 0, json(key.scopes), key.prefix, key.last4, key.createdAt, key.revokedAt, key.userId ?? null);
      this.insertSecret(secret);
    }).immediate();
  }

  private activeCounts(orgId: string): ActiveKeyCounts {
    const row = this.db
      .prepare(`SELECT count(*) AS n, count(*) FILTER (WHERE kind = 'test') AS test FROM api_keys WHERE org_id = ? AND revoked_at IS NULL`)
      .get(orgId) as { n: number; test: number };
    return { all: Number(row.n), test: Number(row.test) };
  }

  private insertSecret(secret: KeySecretRecord): void {
    this.db
      .prepare('INSERT INTO api_key_secrets (hash, key_id, last4, created_at, expires_at) VALUES (?, ?, ?, ?, ?)')
      .run(secret.hash, secret.keyId, secret.last4, secret.createdAt, secret.expiresAt);
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM api_keys WHERE id = ?').get(id) as Row | undefined;
    return row && toKey(row);
  }

  async list(orgId?: string): Promise<ApiKeyRecord[]> {
    const rows = orgId
      ? this.db.prepare('SELECT * FROM api_keys WHERE org_id = ? ORDER BY created_at, id').all(orgId)
      : this.db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all();
    return (rows as Row[]).map(toKey);
  }

  async findBySecretHash(hash: Buffer): Promise<{ key: ApiKeyRecord; secret: KeySecretRecord } | undefined> {
    const row = this.bySecret.get(hash) as Row | undefined;
    if (!row) return undefined;
    return {
      key: toKey(row),
      secret: toSecret({
        hash: row.hash,
        key_id: row.key_id,
        last4: row.secret_last4,
        created_at: row.secret_created_at,
        expires_at: row.expires_at,
      }),
    };
  }

  async rotate(keyId: string, secret: KeySecretRecord, oldExpiresAt: number): Promise<ApiKeyRecord | undefined> {
    return this.db.transaction(() => {
      const exists = this.db.prepare('SELECT 1 FROM api_keys WHERE id = ?').get(keyId);
      if (!exists) return undefined;
      this.db
        .prepare(
          `UPDATE api_key_secrets SET expires_at = ?
           WHERE key_id = ? AND (expires_at IS NULL OR expires_at > ?)`,
        )
        .run(oldExpiresAt, keyId, oldExpiresAt);
      this.insertSecret(secret);
      this.db.prepare('UPDATE api_keys SET last4 = ? WHERE id = ?').run(secret.last4, keyId);
      return toKey(this.db.prepare('SELECT * FROM api_keys WHERE id = ?').get(keyId) as Row);
    }).immediate();
  }

  async revoke(
    keyId: string,
    at: number,
    event: EventRecord,
  ): Promise<{ key: ApiKeyRecord; alreadyRevoked: boolean } | undefined> {
    return this.db.transaction(() => {
      const row = this.db.prepare('SELECT * FROM api_keys WHERE id = ?').get(keyId) as Row | undefined;
      if (!row) return undefined;
      const key = toKey(row);
      if (key.revokedAt !== null) return { key, alreadyRevoked: true };
      this.db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(at, keyId);
      insertEvent(this.db, event);
      return { key: { ...key, revokedAt: at }, alreadyRevoked: false };
    }).immediate();
  }
}

class SqliteEventStore implements EventStore {
  constructor(private readonly db: Db) {}

  async append(event: EventRecord): Promise<StoredEvent> {
    return insertEvent(this.db, event);
  }

  async list(options: { afterSeq?: number; type?: string; limit?: number } = {}): Promise<StoredEvent[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM events WHERE seq > @after AND (@type IS NULL OR type = @type) ORDER BY seq LIMIT @limit`,
      )
      .all({ after: options.afterSeq ?? 0, type: options.type ?? null, limit: options.limit ?? 100 });
    return (rows as Row[]).map(toEvent);
  }

  onAppend(listener: () => void): () => void {
    return addAppendListener(this.db, listener);
  }
}

export class SqliteStore implements Store {
  readonly orgs: OrgStore;
  readonly keys: KeyStore;
  readonly events: EventStore;
  readonly idempotency: IdempotencyStore;
  readonly nodes: NodeStore;
  readonly webhooks: WebhookStore;
  readonly instances: InstanceStore;
  readonly usage: UsageStore;
  readonly replicas: ReplicaStore;
  readonly ledger: LedgerStore;
  readonly responses: ResponseStore;
  readonly remediations: RemediationStore;
  readonly operators: OperatorStore;
  readonly users: UserStore;

  constructor(readonly db: Db) {
    this.orgs = new SqliteOrgStore(db);
    this.keys = new SqliteKeyStore(db);
    this.events = new SqliteEventStore(db);
    this.idempotency = new SqliteIdempotencyStore(db);
    this.nodes = new SqliteNodeStore(db);
    this.webhooks = new SqliteWebhookStore(db);
    this.instances = new SqliteInstanceStore(db);
    this.usage = new SqliteUsageStore(db);
    this.replicas = new SqliteReplicaStore(db);
    this.ledger = new SqliteLedgerStore(db);
    this.responses = new SqliteResponseStore(db);
    this.remediations = new SqliteRemediationStore(db);
    this.operators = new SqliteOperatorStore(db);
    this.users = new SqliteUserStore(db);
  }

  async schemaVersion(): Promise<number> {
    return (this.db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number }).v;
  }

  /** Set when a worker thread checkpoints the WAL; stopped before the database closes. */
  checkpoints: BackgroundCheckpoints | null = null;

  async close(): Promise<void> {
    await this.checkpoints?.stop();
    this.checkpoints = null;
    if (this.db.open) this.db.close();
  }
}
