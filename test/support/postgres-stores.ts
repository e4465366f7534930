// Both store engines behind one fixture, for suites that run the same behaviour on each
// (describe.each(STORE_ENGINES)). Each `open()` in a test gives another store on the
// current database, as a second process or replica would; `reset()` starts the next test
// on an empty one.
// PostgreSQL: one server per test file, one database per fixture, emptied by DELETEs
// between tests (a CREATE DATABASE or TRUNCATE per test costs ~0.5 s; DELETEs a few ms).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { Store } from '../../control-plane/src/store/store.js';
import { openSqliteStore } from '../../control-plane/src/store/sqlite/sqlite-store.js';
import { openPostgresStore } from '../../control-plane/src/store/postgres/postgres-store.js';
import { startPostgres, type TestPostgres } from './postgres.js';

export const STORE_ENGINES = ['sqlite', 'postgres'] as const;
export type StoreEngine = (typeof STORE_ENGINES)[number];

export interface StoreFixture {
  readonly engine: StoreEngine;
  /** Where the current database is: a data dir (SQLite) or a postgres:// URL. */
  readonly location: string;
  /** The PostgreSQL server, for tests that need databases of their own. */
  readonly server?: TestPostgres;
  /** Opens a store on the current database; closed by the next reset() or close(). */
  open(options?: { poolSize?: number }): Promise<Store>;
  /** Closes every open store and starts an empty database. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

export async function storeFixture(engine: StoreEngine): Promise<StoreFixture> {
  return engine === 'sqlite' ? sqliteFixture() : postgresFixture();
}

function tracking(openOne: (options: { poolSize?: number }) => Promise<Store>) {
  const open: Store[] = [];
  return {
    async open(options: { poolSize?: number } = {}) {
      const store = await openOne(options);
      open.push(store);
      return store;
    },
    async closeAll() {
      await Promise.all(open.splice(0).map((s) => s.close()));
    },
  };
}

function sqliteFixture(): StoreFixture {
  let dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
  const stores = tracking(async () => openSqliteStore(dir));
  return {
    engine: 'sqlite',
    get location() {
      return dir;
    },
    open: stores.open,
    async reset() {
      await stores.closeAll();
      rmSync(dir, { recursive: true, force: true });
      dir = mkdtempSync(join(tmpdir(), 'svc-store-'));
    },
    async close() {
      await stores.closeAll();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresFixture(): Promise<StoreFixture> {
  const server: TestPostgres = await startPostgres();
  const url = await server.createDatabase();
  // Connections are slow to open on a busy machine (~0.2 s each way): the stores and the
  // client that empties the database live for the whole file. Between tests the n-th
  // open() gets the same store again, on an emptied database.
  const opened: Store[] = [];
  const extra: Store[] = [];
  let used = 0;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  return {
    engine: 'postgres',
    location: url,
    server,
    async open(options = {}) {
      if (options.poolSize === undefined && used < opened.length) return opened[used++]!;
      const store = await openPostgresStore(url, { poolSize: options.poolSize ?? 4 });
      if (options.poolSize === undefined) {
        opened.push(store);
        used++;
      } else {
        extra.push(store);
      }
      return store;
    },
    async reset() {
      await Promise.all(extra.splice(0).map((s) => s.close()));
      used = 0;
      if (opened.length > 0) await emptyDatabase(admin);
    },
    async close() {
      await Promise.all([...opened, ...extra.splice(0)].map((s) => s.close()));
      await admin.end();
      await server.stop();
    },
  };
}

/**
 * Every table but the migration record emptied, sequences restarted, seed rows put
 * back. DELETE with foreign-key triggers off, not TRUNCATE: on tables this small it
 * takes milliseconds where TRUNCATE takes half a second.
 */
async function emptyDatabase(client: pg.Client): Promise<void> {
  const tables = (await client.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'`)).rows.map(
    (r: { tablename: string }) => r.tablename,
  );
  const sequences = (await client.query(`SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'`)).rows.map(
    (r: { sequencename: string }) => r.sequencename,
  );
  await client.query(
    [
      'BEGIN',
      "SET LOCAL session_replication_role = 'replica'",
      ...tables.map((t) => `DELETE FROM "${t}"`),
      ...sequences.map((q) => `SELECT setval('"${q}"', 1, false)`),
      'INSERT INTO webhook_fan_out_cursor (id, last_seq) VALUES (1, 0)',
      'INSERT INTO remediation_cursor (id, seq) VALUES (1, 0)',
      'INSERT INTO invoice_sequence (id, next) VALUES (1, 1)',
      'COMMIT',
    ].join(';\n'),
  );
}
