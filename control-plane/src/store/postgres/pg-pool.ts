// The connection pool and the unit-of-work helper every PostgreSQL store part uses.
// int8 (bigint) comes back as a JS number: money, counters and times are integers well
// inside 2^53, and a value outside that range is refused loudly instead of rounded.
import pg from 'pg';

export type Row = Record<string, unknown>;

/** A pool or one checked-out client: what a query runs on, in or out of a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

const INT8_OID = 20;

export function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`bigint ${text} is outside the safe integer range`);
  return value;
}

const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID && format !== 'binary') return parseInt8;
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

export interface PoolOptions {
  /** Most connections this process opens (SVC_DATABASE_POOL_SIZE). */
  max: number;
}

export function createPool(url: string, options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max,
    types: types as pg.CustomTypesConfig,
    // A request waits for a free connection, but not forever: a flood fails requests
    // instead of queueing them without bound.
    connectionTimeoutMillis: 30_000,
    // A process frozen mid-transaction (stopped, swapping) must not hold row locks or
    // the events lock over every other replica for long: the server ends it.
    idle_in_transaction_session_timeout: 60_000,
  });
  // An idle client whose server went away emits here; without a listener it would crash
  // the process. The next query gets a fresh connection.
  pool.on('error', () => {});
  return pool;
}

export function clientOptions(url: string): pg.ClientConfig {
  return { connectionString: url, types: types as pg.CustomTypesConfig };
}

/**
 * Runs `work` in one transaction on one connection: committed when it returns,
 * rolled back when it throws (the error is re-thrown).
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/**
 * PostgreSQL text cannot hold U+0000, which SQLite stores and JSON allows: a tenant's
 * `user` field or webhook description holding one would fail the statement (a 500, and
 * a lost usage batch with other tenants' records in it). It is stored as U+FFFD.
 */
export function storable(value: unknown): unknown {
  if (typeof value === 'string') return value.includes('\u0000') ? value.replaceAll('\u0000', '\uFFFD') : value;
  if (Array.isArray(value)) return value.map(storable);
  return value;
}

export async function one(db: Queryable, text: string, values: unknown[] = []): Promise<Row | undefined> {
  const result = await db.query(text, values.map(storable));
  return result.rows[0] as Row | undefined;
}

export async function all(db: Queryable, text: string, values: unknown[] = []): Promise<Row[]> {
  return (await db.query(text, values.map(storable))).rows as Row[];
}

export async function run(db: Queryable, text: string, values: unknown[] = []): Promise<number> {
  return (await db.query(text, values.map(storable))).rowCount ?? 0;
}
