// SVC_WORKERS: several control-plane processes on one machine sharing its ports. The real
// entry (control-plane/src/server.ts) on a real PostgreSQL, reached over real TCP
// connections. Which process answered is read from the JSON logs (pino writes each
// line's pid), never from anything the API exposes.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MERGED_REUSE_MS } from '../control-plane/src/cluster/merged-metrics.js';
import { ROOT } from './support/node-agent-process.js';
import { startPostgres, type TestPostgres } from './support/postgres.js';

interface LogLine {
  pid: number;
  msg?: string;
  [field: string]: unknown;
}

/** The control plane's own entry as a child, with its JSON log lines collected. */
function startServer(env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/server.ts')], {
    cwd: ROOT,
    env: { ...process.env, SVC_LOG_LEVEL: 'info', SVC_LOG_FORMAT: 'json', SVC_HTTP_PORT: '0', SVC_GRPC_PORT: '0', SVC_REPLICAS: 'none', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: LogLine[] = [];
  let partial = '';
  let output = '';
  const waiters = new Set<() => void>();
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    const parts = (partial + chunk.toString()).split('\n');
    partial = parts.pop()!;
    for (const text of parts) {
      try {
        lines.push(JSON.parse(text) as LogLine);
      } catch {
        continue;
      }
    }
    for (const wake of [...waiters]) wake();
  });
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.once('exit', () => {
    for (const wake of [...waiters]) wake();
  });
  /** Resolves once `count` log lines (from `from` on) match. */
  const waitFor = (match: (l: LogLine) => boolean, count = 1, from = 0, timeoutMs = 90_000): Promise<LogLine[]> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiters.delete(look);
        reject(new Error(`timed out waiting for the control plane's log:\n${output.slice(-4000)}`));
      }, timeoutMs);
      const look = (): void => {
        const found = lines.slice(from).filter(match);
        if (found.length >= count) {
          waiters.delete(look);
          clearTimeout(timer);
          resolve(found);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          waiters.delete(look);
          clearTimeout(timer);
          reject(new Error(`the control plane exited:\n${output.slice(-4000)}`));
        }
      };
      waiters.add(look);
      look();
    });
  return { child, lines, waitFor, exited, output: () => output };
}

/** One request on a connection of its own, so the cluster may hand it to any worker. */
function get(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { ...headers, connection: 'close' }, agent: false }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', reject);
    req.end();
  });
}

/** GET on a connection of its own: the status and the body. */
function getText(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { connection: 'close' }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once('error', reject);
    req.end();
  });
}

/** The sum of a metric's samples whose labels include every `labels` pair, from Prometheus text. */
function sampleSum(exposition: string, metric: string, labels: Record<string, string> = {}): number {
  return exposition
    .split('\n')
    .filter((line) => line.startsWith(`${metric}{`) || line.startsWith(`${metric} `))
    .filter((line) => Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('SVC_WORKERS on PostgreSQL', () => {
  let pg: TestPostgres;
  let databaseUrl: string;
  let dataDir: string;
  let server: ReturnType<typeof startServer>;
  let baseUrl: string;
  let key: string;

  beforeAll(async () => {
    pg = await startPostgres();
    databaseUrl = await pg.createDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'svc-workers-'));
    server = startServer({ SVC_DATABASE_URL: databaseUrl, SVC_WORKERS: '2', SVC_DATA_DIR: dataDir });
    await server.waitFor((l) => l.msg === 'worker ready', 2);
    baseUrl = (await server.waitFor((l) => typeof l.base_url === 'string'))[0]!.base_url as string;
    // A key made by another process (svcctl on the same database) works on every worker.
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), 'keys', 'create', '--admin', '--json'], {
      cwd: ROOT,
      env: { ...process.env, SVC_DATABASE_URL: databaseUrl, SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'warn' },
    });
    key = (JSON.parse(stdout) as { key: string }).key;
  }, 180_000);

  afterAll(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill('SIGKILL');
      for (const l of server.lines) if (l.msg === 'worker ready' && alive(l.worker_pid as number)) process.kill(l.worker_pid as number, 'SIGKILL');
    }
    await pg?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  /** Sends `n` requests, each on its own connection; returns the pids whose logs answered them. */
  const servingPids = async (n: number): Promise<Set<number>> => {
    const from = server.lines.length;
    for (let i = 0; i < n; i++) expect(await get(`${baseUrl}/v1/models`, { authorization: `Bearer ${key}` })).toBe(200);
    const done = await server.waitFor((l) => l.msg === 'request completed', n, from);
    return new Set(done.map((l) => l.pid));
  };

  it('two worker processes, not the primary, answer requests on one port', async () => {
    const workerPids = new Set(server.lines.filter((l) => l.msg === 'worker ready').map((l) => l.worker_pid as number));
    expect(workerPids.size).toBe(2);
    expect(workerPids.has(server.child.pid!)).toBe(false);
    expect(await servingPids(12)).toEqual(workerPids);
  });

  it("GET /metrics answers with every worker's counts, merged by the primary, whichever worker serves the scrape", async () => {
    const models = { route: '/v1/models', status: '200' };
    const first = await getText(`${baseUrl}/metrics`);
    expect(first.status).toBe(200);
    const before = sampleSum(first.body, 'svc_http_requests_total', models);
    expect((await servingPids(16)).size).toBe(2);
    // A merge answers the scrapes of the next second too: wait past the one that read `before`.
    await new Promise((r) => setTimeout(r, MERGED_REUSE_MS + 100));

    const from = server.lines.length;
    const scrapes = [];
    for (let i = 0; i < 6; i++) scrapes.push(await getText(`${baseUrl}/metrics`));
    // The scrapes too went to both workers, and every one saw all 16 requests.
    const scrapers = await server.waitFor((l) => l.msg === 'request completed', 6, from);
    expect(new Set(scrapers.map((l) => l.pid)).size).toBe(2);
    for (const scrape of scrapes) {
      expect(scrape.status).toBe(200);
      expect(sampleSum(scrape.body, 'svc_http_requests_total', models)).toBe(before + 16);
      // One leader among the workers, counted once; a gauge read from the store, once.
      expect(sampleSum(scrape.body, 'svc_control_plane_leader')).toBe(1);
      // Both workers count each other (each sends a model server half its in-flight limit):
      // the merge shows that count, not its sum over the workers.
      expect(sampleSum(scrape.body, 'svc_control_plane_processes')).toBe(2);
      expect(scrape.body.match(/^svc_webhook_deliveries_pending /gm)).toHaveLength(1);
      expect(sampleSum(scrape.body, 'svc_webhook_deliveries_pending')).toBe(0);
    }
  });

  it('a flood of scrapes (GET /metrics needs no key) is answered from one merge a second, not one per request', async () => {
    const started = Date.now();
    const flood = await Promise.all(Array.from({ length: 200 }, () => getText(`${baseUrl}/metrics`)));
    const seconds = Math.ceil((Date.now() - started) / 1000);
    expect(flood.every((r) => r.status === 200)).toBe(true);
    // The merged text differs from one merge to the next (its process gauges move), so the
    // number of distinct bodies bounds the merges the 200 scrapes cost: about one a second.
    expect(new Set(flood.map((r) => r.body)).size).toBeLessThanOrEqual(seconds + 1);
  });

  it('a killed worker is replaced, and the new one serves too', async () => {
    const before = server.lines.filter((l) => l.msg === 'worker ready').map((l) => l.worker_pid as number);
    const victim = before[0]!;
    const from = server.lines.length;
    process.kill(victim, 'SIGKILL');
    const [exited] = await server.waitFor((l) => l.msg === 'worker exited; restarting it', 1, from);
    expect(exited!.worker_pid).toBe(victim);
    expect(exited!.signal).toBe('SIGKILL');
    // Scraped while the replacement starts: the survivor's metrics, at once, not a wait on
    // a worker that cannot answer yet.
    await new Promise((r) => setTimeout(r, 300));
    const scrape = await getText(`${baseUrl}/metrics`);
    expect(scrape.status).toBe(200);
    expect(sampleSum(scrape.body, 'svc_http_requests_total')).toBeGreaterThan(0);
    expect(server.lines.slice(from).some((l) => l.msg === 'worker ready'), 'the scrape came before the replacement was ready').toBe(false);
    const [ready] = await server.waitFor((l) => l.msg === 'worker ready', 1, from);
    const replacement = ready!.worker_pid as number;
    expect(before).not.toContain(replacement);
    expect(await servingPids(12)).toEqual(new Set([before[1]!, replacement]));
    // The replacement starts the control plane from scratch (tsx compiles it): slow on a busy host.
  }, 120_000);

  it('SIGTERM to the primary drains and stops every worker', async () => {
    const workers = server.lines.filter((l) => l.msg === 'worker ready').map((l) => l.worker_pid as number);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(workers.filter(alive)).toEqual([]);
  });
});

describe('SVC_WORKERS when no worker can start', () => {
  it('stops with the worker\'s exit code instead of restarting it in a loop', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-workers-down-'));
    // Nothing listens on port 1: every worker fails to open the store.
    const server = startServer({ SVC_DATA_DIR: dataDir, SVC_WORKERS: '2', SVC_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' });
    try {
      const code = await server.exited;
      expect(code).not.toBe(0);
      expect(server.lines.filter((l) => l.msg === 'a worker failed to start; stopping')).toHaveLength(1);
      expect(server.lines.some((l) => l.msg === 'worker exited; restarting it')).toBe(false);
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('SVC_WORKERS on SQLite', () => {
  it('stays one process and says why at start', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-workers-sqlite-'));
    const server = startServer({ SVC_DATA_DIR: dataDir, SVC_WORKERS: '2', SVC_DATABASE_URL: '' });
    try {
      const [warning] = await server.waitFor((l) => typeof l.msg === 'string' && l.msg.includes('SQLite'));
      expect(warning!.msg).toMatch(/SVC_DATABASE_URL/);
      const baseUrl = (await server.waitFor((l) => typeof l.base_url === 'string'))[0]!.base_url as string;
      const from = server.lines.length;
      for (let i = 0; i < 4; i++) expect(await get(`${baseUrl}/healthz`)).toBe(200);
      const done = await server.waitFor((l) => l.msg === 'request completed', 4, from);
      expect(new Set(done.map((l) => l.pid))).toEqual(new Set([server.child.pid]));
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
