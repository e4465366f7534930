// A real, throwaway PostgreSQL server for tests: initdb'd into a temporary directory,
// listening on 127.0.0.1 at a free port, stopped and removed by `stop()`. The server
// refuses to run as root, so as root it runs as the `postgres` user the Debian package
// creates. Durability is off (fsync, synchronous_commit): tests need speed, not crash
// safety. Each caller gets its own databases (CREATE DATABASE), so test files that
// each start a server, or share one through SVC_TEST_POSTGRES_URL, never see each
// other's rows.
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { freePort } from './node-agent-process.js';

const exec = promisify(execFile);

export interface TestPostgres {
  /** postgres://… of the server's maintenance database. */
  readonly adminUrl: string;
  /** Creates an empty database (or a copy of `template`) and returns its URL. */
  createDatabase(options?: { template?: string }): Promise<string>;
  stop(): Promise<void>;
}

/** The newest installed server's bin directory (Debian: /usr/lib/postgresql/<major>/bin). */
export function postgresBinDir(): string {
  if (process.env.SVC_POSTGRES_BIN) return process.env.SVC_POSTGRES_BIN;
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((d) => existsSync(join(root, d, 'bin', 'initdb'))) : [];
  if (majors.length === 0) throw new Error('PostgreSQL server binaries not found: run `bash scripts/setup-host.sh` (installs postgresql-15) or set SVC_POSTGRES_BIN');
  return join(root, majors.sort((a, b) => Number(b) - Number(a))[0]!, 'bin');
}

export function databaseName(url: string): string {
  return new URL(url).pathname.slice(1);
}

/** Starts a server, or uses the one SVC_TEST_POSTGRES_URL names (a CI service). */
export async function startPostgres(): Promise<TestPostgres> {
  const shared = process.env.SVC_TEST_POSTGRES_URL;
  if (shared) return withDatabases(shared, async () => {});
  const bin = postgresBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'svc-pg-'));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) chownSync(dir, Number((await exec('id', ['-u', 'postgres'])).stdout.trim()), Number((await exec('id', ['-g', 'postgres'])).stdout.trim()));
  const runAs = (cmd: string, args: string[]) => (asRoot ? exec('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args]) : exec(join(bin, cmd), args));
  const data = join(dir, 'data');
  try {
    await runAs('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  let port = 0;
  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
    try {
      await runAs('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', '-t', '30', 'start']);
      break;
    } catch (err) {
      // Another process may have taken the port between freePort and the listen.
      if (attempt >= 2) {
        const log = existsSync(join(dir, 'log')) ? readFileSync(join(dir, 'log'), 'utf8') : '';
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`PostgreSQL did not start: ${(err as Error).message}\n${log}`);
      }
    }
  }
  return withDatabases(`postgres://postgres@127.0.0.1:${port}/postgres`, async () => {
    await runAs('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });
}

function withDatabases(adminUrl: string, shutdown: () => Promise<void>): TestPostgres {
  const created: string[] = [];
  const admin = async <T>(work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  return {
    adminUrl,
    async createDatabase(options = {}) {
      const name = `svc_test_${randomBytes(6).toString('hex')}`;
      const template = options.template ? ` TEMPLATE "${databaseName(options.template)}"` : '';
      await admin((c) => c.query(`CREATE DATABASE "${name}"${template}`));
      created.push(name);
      const url = new URL(adminUrl);
      url.pathname = `/${name}`;
      return url.toString();
    },
    async stop() {
      // A shared server outlives us: drop what we made. Our own goes away whole.
      if (process.env.SVC_TEST_POSTGRES_URL) {
        await admin(async (c) => {
          for (const name of created) await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
        });
      }
      await shutdown();
    },
  };
}
