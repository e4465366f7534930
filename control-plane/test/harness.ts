// A real control plane on 127.0.0.1:0 with its own SQLite data dir (or, with
// `engine: 'postgres'`, its own database on a PostgreSQL server started for it), for
// API suites. Tests talk to it over real HTTP (fetch), not inject, where the network matters.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ManualClock, type Clock } from '@svc/shared';
import { PROTOCOL_VERSION } from '@svc/proto';
import { buildApp, type AppDeps } from '../src/app.js';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../src/config.js';
import type { Scope } from '../src/keys/scopes.js';
import type { KeyKind, OrgRecord } from '../src/store/records.js';
import { openSqliteStore, type SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { openPostgresStore } from '../src/store/postgres/postgres-store.js';
import type { Store } from '../src/store/store.js';
import { startPostgres } from '../../test/support/postgres.js';
import type { StoreEngine } from '../../test/support/postgres-stores.js';

export interface TestControlPlane<S extends Store = SqliteStore> {
  app: FastifyInstance;
  store: S;
  baseUrl: string;
  dataDir: string;
  org: OrgRecord;
  clock: Clock;
  /** Creates a key in the default org and returns its value. */
  key(options?: { kind?: KeyKind; scopes?: Scope[]; admin?: boolean; orgId?: string }): Promise<string>;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface RequestOptions {
  key?: string;
  body?: unknown;
  /** Sent as-is, with no JSON encoding. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export function tempDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'svc-test-'));
}

type StartOptions = { config?: Partial<ControlPlaneConfig>; clock?: Clock; replicas?: AppDeps['replicas']; webhookResolver?: AppDeps['webhookResolver'] };

// The plain form last: Parameters<> and ReturnType<> of an overloaded function see the last one.
export async function startControlPlane(options: StartOptions & { engine: StoreEngine }): Promise<TestControlPlane<Store>>;
export async function startControlPlane(options?: StartOptions): Promise<TestControlPlane>;
export async function startControlPlane(options: StartOptions & { engine?: StoreEngine } = {}): Promise<TestControlPlane<Store>> {
  const dataDir = tempDataDir();
  const clock = options.clock ?? new ManualClock(Date.now());
  let store: Store;
  let stopDatabase = async (): Promise<void> => {};
  let databaseUrl = '';
  if (options.engine === 'postgres') {
    const server = await startPostgres();
    databaseUrl = await server.createDatabase();
    store = await openPostgresStore(databaseUrl);
    stopDatabase = () => server.stop();
  } else {
    store = openSqliteStore(dataDir);
  }
  const config = defaultControlPlaneConfig({ dataDir, databaseUrl, httpPort: 0, logLevel: 'silent', ...options.config });
  const app = await buildApp({
    config,
    store,
    clock,
    logger: false,
    ...(options.replicas ? { replicas: options.replicas } : {}),
    ...(options.webhookResolver ? { webhookResolver: options.webhookResolver } : {}),
  });
  const { org } = await app.services.orgs.ensureDefaultOrg();
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const baseUrl = `http://127.0.0.1:${port}`;

  const request = async (method: string, path: string, opts: RequestOptions = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    let body: string | undefined = opts.rawBody;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(baseUrl + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  return {
    app,
    store,
    baseUrl,
    dataDir,
    org,
    clock,
    async key(opts = {}) {
      const created = await app.services.keys.create({ orgId: opts.orgId ?? org.id, ...opts });
      return created.value;
    },
    request,
    async close() {
      await app.close();
      await store.close();
      await stopDatabase();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A node with GPUs, registered the way an agent registers (enrollment, ready, telemetry
 * flush), for suites that need capacity without running an agent.
 */
export async function addReadyNode(
  cp: TestControlPlane<Store>,
  options: { pool?: 'na' | 'eu' | 'apac'; gpus?: number; model?: string } = {},
): Promise<{ nodeId: string; gpuUuids: string[]; secret: string }> {
  const { services } = cp.app;
  const pool = options.pool ?? 'na';
  const token = await services.enrollment.createToken({ pool });
  const { node, secret } = await services.enrollment.enroll({ token: token.value, hostname: `host-${token.record.id}`, pool, protocolVersion: PROTOCOL_VERSION });
  await cp.store.nodes.setStatus(node.id, 'ready', null);
  const gpus = Array.from({ length: options.gpus ?? 8 }, (_, index) => ({
    uuid: `GPU-${node.id}-${index}`,
    index,
    name: options.model ?? 'NVIDIA H100 80GB HBM3',
    memoryTotalBytes: 80 * 2 ** 30,
    healthy: true,
    healthReason: '',
    sample: null,
    sampledAt: cp.clock.now(),
  }));
  await cp.store.nodes.flushTelemetry([{ nodeId: node.id, lastSeenAt: cp.clock.now(), gpus }]);
  return { nodeId: node.id, gpuUuids: gpus.map((g) => g.uuid), secret };
}

/** Asserts the spec's error envelope and returns the error object. */
export function expectError(res: TestResponse, status: number, type: string): { type: string; message: string; param?: string; code?: string } {
  if (res.status !== status || res.body?.error?.type !== type) {
    throw new Error(`expected ${status} ${type}, got ${res.status} ${res.text}`);
  }
  const error = res.body.error;
  if (typeof error.message !== 'string' || error.message.length === 0) throw new Error(`error without a message: ${res.text}`);
  return error;
}
