// PostgreSQL implementation of the store (node-postgres, one pool per process). Several
// control-plane processes may share one database: every method is one transaction (or
// one statement), races are settled by row locks and unique keys, and event nudges
// reach every process through LISTEN/NOTIFY.
import type { OperatorStore } from '../operator-store.js';
import { PgOperatorStore } from './operator-store.js';
import type { UserRecord, UserStore } from '../user-store.js';
import { PgUserStore } from './user-store.js';
import { toUser } from '../sqlite/user-store.js';
import pg from 'pg';
import type { ApiKeyRecord, EventRecord, KeySecretRecord, OrgRecord, StoredEvent } from '../records.js';
import type { ActiveKeyCounts, EventStore, IdempotencyStore, KeyStore, OrgStore, Store } from '../store.js';
import type { NodeStore } from '../node-store.js';
import type { WebhookStore } from '../../webhooks/webhook-store.js';
import type { InstanceStore } from '../instance-store.js';
import type { UsageStore } from '../usage-store.js';
import type { ReplicaStore } from '../replica-store.js';
import type { LedgerStore } from '../ledger-store.js';
import type { ResponseStore } from '../response-store.js';
import type { RemediationStore } from '../remediation-store.js';
import { orgPatchColumns, toKey, toOrg, toSecret } from '../sqlite/sqlite-store.js';
import { toEvent } from '../sqlite/event-rows.js';
import { EventNotifications, insertEvent, type StoreChange } from './event-rows.js';
import { AdvisoryLeadership } from './advisory-leadership.js';
import type { Leadership } from '../../leadership.js';
import { applyPgMigrations, PG_MIGRATIONS, type Migration } from './migrations.js';
import { PgIdempotencyStore } from './idempotency-store.js';
import { PgNodeStore } from './node-store.js';
import { PgWebhookStore } from './webhook-store.js';
import { PgInstanceStore } from './instance-store.js';
import { PgUsageStore } from './usage-store.js';
import { PgReplicaStore } from './replica-store.js';
import { PgLedgerStore } from './ledger-store.js';
import { PgResponseStore } from './response-store.js';
import { PgRemediationStore } from './remediation-store.js';
import { PgRateLimitStore } from './rate-limit-store.js';
import type { RateLimitStore } from '../rate-limit-store.js';
import { all, createPool, inTransaction, one, run } from './pg-pool.js';

export interface PostgresStoreOptions {
  /** Most connections this process holds (SVC_DATABASE_POOL_SIZE). */
  poolSize?: number;
  migrations?: Migration[];
}

const json = (value: unknown): string => JSON.stringify(value);

/** Opens the pool and brings the schema up to date (under an advisory lock: replicas may start together). */
export async function openPostgresStore(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
  const pool = createPool(url, { max: options.poolSize ?? 10 });
  try {
    const client = await pool.connect();
    try {
      await applyPgMigrations(client, options.migrations ?? PG_MIGRATIONS);
    } finally {
      client.release();
    }
  } catch (err) {
    await pool.end();
    throw err;
  }
  return new PostgresStore(pool, url);
}

class PgOrgStore implements OrgStore {
  constructor(private readonly pool: pg.Pool) {}

  async create(org: OrgRecord): Promise<void> {
    await run(
      this.pool,
      `INSERT INTO orgs (id, name, tier, ip_allowlist, referrer_allowlist, allowed_models, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [org.id, org.name, org.tier, json(org.ipAllowlist), json(org.referrerAllowlist), org.allowedModels === null ? null : json(org.allowedModels), org.createdAt],
    );
  }

  async get(id: string): Promise<OrgRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM orgs WHERE id = $1', [id]);
    return row && toOrg(row);
  }

  async getByName(name: string): Promise<OrgRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM orgs WHERE name = $1', [name]);
    return row && toOrg(row);
  }

  async list(): Promise<OrgRecord[]> {
    return (await all(this.pool, 'SELECT * FROM orgs ORDER BY created_at, id')).map(toOrg);
  }

  async update(
    id: string,
    patch: Partial<Pick<OrgRecord, 'name' | 'tier' | 'ipAllowlist' | 'referrerAllowlist' | 'allowedModels' | 'defaultPool' | 'gpuQuota'>>,
  ): Promise<OrgRecord | undefined> {
    const columns = orgPatchColumns(patch);
    const names = Object.keys(columns);
    if (names.length === 0) return this.get(id);
    const row = await one(
      this.pool,
      `UPDATE orgs SET ${names.map((n, i) => `${n} = $${i + 2}`).join(', ')} WHERE id = $1 RETURNING *`,
      [id, ...names.map((n) => columns[n])],
    );
    return row && toOrg(row);
  }
}

class PgKeyStore implements KeyStore {
  constructor(private readonly pool: pg.Pool) {}

  async create(
    key: ApiKeyRecord,
    secret: KeySecretRecord,
    mayOwn?: (owner: UserRecord | undefined) => void,
    mayAdd?: (active: ActiveKeyCounts) => void,
  ): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      if (key.userId && mayOwn) {
        // FOR SHARE: a role change or removal of the owner waits until this key is in (and
        // then sees it), and this waits for one under way (and then reads its outcome).
        const row = await one(client, 'SELECT * FROM org_users WHERE id = $1 FOR SHARE', [key.userId]);
        mayOwn(row && toUser(row));
      }
      if (mayAdd) {
        // The org's key creates take this lock one at a time, so each counts the keys the
        // ones before it committed (READ COMMITTED: every statement sees the latest commits).
        await client.query("SELECT pg_advisory_xact_lock(hashtextextended('svc-org-keys:' || $1, 0))", [key.orgId]);
        const row = (await one(
          client,
          `SELECT count(*) AS n, count(*) FILTER (WHERE kind = 'test') AS test FROM api_keys WHERE org_id = $1 AND revoked_at IS NULL`,
          [key.orgId],
        ))!;
        mayAdd({ all: Number(row.n), test: Number(row.test) });
      }
      await run(
        client,
        `INSERT INTO api_keys (id, org_id, name, kind, admin, scopes, prefix, last4, created_at, revoked_at, user_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [key.id, key.orgId, key.name, key.kind, key.admin, json(key.scopes), key.prefix, key.last4, key.createdAt, key.revokedAt, key.userId ?? null],
      );
      await insertSecret(client, secret);
    });
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM api_keys WHERE id = $1', [id]);
    return row && toKey(row);
  }

  async list(orgId?: string): Promise<ApiKeyRecord[]> {
    const rows = orgId
      ? await all(this.pool, 'SELECT * FROM api_keys WHERE org_id = $1 ORDER BY created_at, id', [orgId])
      : await all(this.pool, 'SELECT * FROM api_keys ORDER BY created_at, id');
    return rows.map(toKey);
  }

  async findBySecretHash(hash: Buffer): Promise<{ key: ApiKeyRecord; secret: KeySecretRecord } | undefined> {
    // The hot path of every request: one indexed lookup, a named (server-prepared) statement.
    const result = await this.pool.query({
      name: 'svc_key_by_secret',
      text: `SELECT s.hash, s.key_id, s.last4 AS secret_last4, s.created_at AS secret_created_at, s.expires_at,
                    k.* FROM api_key_secrets s JOIN api_keys k ON k.id = s.key_id WHERE s.hash = $1`,
      values: [hash],
    });
    const row = result.rows[0] as Record<string, unknown> | undefined;
    if (!row) return undefined;
    return {
      key: toKey(row),
      secret: toSecret({ hash: row.hash, key_id: row.key_id, last4: row.secret_last4, created_at: row.secret_created_at, expires_at: row.expires_at }),
    };
  }

  async rotate(keyId: string, secret: KeySecretRecord, oldExpiresAt: number): Promise<ApiKeyRecord | undefined> {
    return inTransaction(this.pool, async (client) => {
      if (!(await one(client, 'SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE', [keyId]))) return undefined;
      await run(client, 'UPDATE api_key_secrets SET expires_at = $1 WHERE key_id = $2 AND (expires_at IS NULL OR expires_at > $1)', [oldExpiresAt, keyId]);
      await insertSecret(client, secret);
      return toKey((await one(client, 'UPDATE api_keys SET last4 = $1 WHERE id = $2 RETURNING *', [secret.last4, keyId]))!);
    });
  }

  async revoke(keyId: string, at: number, event: EventRecord): Promise<{ key: ApiKeyRecord; alreadyRevoked: boolean } | undefined> {
    return inTransaction(this.pool, async (client) => {
      // The row lock makes concurrent revokes append one event between them.
      const row = await one(client, 'SELECT * FROM api_keys WHERE id = $1 FOR UPDATE', [keyId]);
      if (!row) return undefined;
      const key = toKey(row);
      if (key.revokedAt !== null) return { key, alreadyRevoked: true };
      await run(client, 'UPDATE api_keys SET revoked_at = $1 WHERE id = $2', [at, keyId]);
      await insertEvent(client, event);
      return { key: { ...key, revokedAt: at }, alreadyRevoked: false };
    });
  }
}

async function insertSecret(client: pg.ClientBase, secret: KeySecretRecord): Promise<void> {
  await run(client, 'INSERT INTO api_key_secrets (hash, key_id, last4, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
    secret.hash,
    secret.keyId,
    secret.last4,
    secret.createdAt,
    secret.expiresAt,
  ]);
}

class PgEventStore implements EventStore {
  constructor(
    private readonly pool: pg.Pool,
    readonly notifications: EventNotifications,
  ) {}

  async append(event: EventRecord): Promise<StoredEvent> {
    return inTransaction(this.pool, (client) => insertEvent(client, event));
  }

  async list(options: { afterSeq?: number; type?: string; limit?: number } = {}): Promise<StoredEvent[]> {
    const rows = await all(this.pool, 'SELECT * FROM events WHERE seq > $1 AND ($2::text IS NULL OR type = $2) ORDER BY seq LIMIT $3', [
      options.afterSeq ?? 0,
      options.type ?? null,
      options.limit ?? 100,
    ]);
    return rows.map(toEvent);
  }

  /** Listeners hear of events committed by any process on this database (NOTIFY). */
  onAppend(listener: () => void): () => void {
    return this.notifications.add(listener);
  }
}

export class PostgresStore implements Store {
  readonly orgs: OrgStore;
  readonly keys: KeyStore;
  readonly events: EventStore;
  readonly idempotency: IdempotencyStore;
  readonly nodes: NodeStore;
  readonly webhooks: WebhookStore;
  readonly instances: InstanceStore;
  readonly usage: UsageStore;
  readonly replicas: ReplicaStore;
  readonly operators: OperatorStore;
  readonly ledger: LedgerStore;
  readonly responses: ResponseStore;
  readonly remediations: RemediationStore;
  readonly users: UserStore;
  readonly rateLimits: RateLimitStore;
  /** The LISTEN connection behind `events.onAppend`; `ready()` resolves once it listens. */
  readonly notifications: EventNotifications;
  private closing: Promise<void> | null = null;

  constructor(
    readonly pool: pg.Pool,
    private readonly url: string,
  ) {
    this.notifications = new EventNotifications(url, pg.Client);
    this.orgs = new PgOrgStore(pool);
    this.keys = new PgKeyStore(pool);
    this.events = new PgEventStore(pool, this.notifications);
    this.idempotency = new PgIdempotencyStore(pool);
    this.nodes = new PgNodeStore(pool);
    this.webhooks = new PgWebhookStore(pool);
    this.instances = new PgInstanceStore(pool);
    this.usage = new PgUsageStore(pool);
    this.replicas = new PgReplicaStore(pool);
    this.operators = new PgOperatorStore(pool);
    this.ledger = new PgLedgerStore(pool);
    this.responses = new PgResponseStore(pool);
    this.remediations = new PgRemediationStore(pool);
    this.users = new PgUserStore(pool);
    this.rateLimits = new PgRateLimitStore(pool);
  }

  onChange(listener: (change: StoreChange) => void): Promise<() => void> {
    return this.notifications.addChangeListener(listener);
  }

  async campaign(options: { retryMs: number; onError?: (err: unknown) => void }): Promise<Leadership> {
    const leadership = new AdvisoryLeadership(this.url, pg.Client, options);
    await leadership.start();
    return leadership;
  }

  async schemaVersion(): Promise<number> {
    return Number((await one(this.pool, 'SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations'))!.v);
  }

  close(): Promise<void> {
    this.closing ??= this.notifications.close().then(() => this.pool.end());
    return this.closing;
  }
}
