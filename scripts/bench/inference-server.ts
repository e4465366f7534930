// A bench helper process: the real control plane whose replica directory holds the
// replicas named in BENCH_REPLICAS (JSON: [{baseUrl, model, quantization, image}]), as
// agents would report them. On SQLite in a temporary directory, or on the PostgreSQL
// database BENCH_DATABASE_URL names; there BENCH_WORKERS=n runs n processes sharing
// the port through the same primary SVC_WORKERS uses (control-plane/src/cluster).
// Prints {port, key} when ready; exits when its stdin closes.
import cluster from 'node:cluster';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@svc/shared';
import { buildApp, defaultControlPlaneConfig, openPostgresStore, openSqliteStore, type Store } from '@svc/control-plane';
import type { LiveReplica } from '../../control-plane/src/inference/replica-source.js';
import { startPrimary, WORKER_READY } from '../../control-plane/src/cluster/primary.js';
import { serveUntilStopped } from './helper-process.js';

export interface InferenceServerInfo {
  port: number;
  key: string;
}

const wanted = JSON.parse(process.env.BENCH_REPLICAS ?? '[]') as Array<Pick<LiveReplica, 'baseUrl' | 'model' | 'quantization' | 'image'>>;
const replicas: LiveReplica[] = wanted.map((r, i) => ({ apiKey: undefined, ...r, id: `rep_bench${i}`, pool: 'na', nodeId: 'node_bench', engine: 'cpu' }));
const databaseUrl = process.env.BENCH_DATABASE_URL ?? '';
const workers = Number(process.env.BENCH_WORKERS ?? 1);
if (workers > 1 && !databaseUrl) throw new Error('BENCH_WORKERS > 1 needs BENCH_DATABASE_URL (SQLite takes one process)');

let dataDir: string | undefined;
async function openBenchStore(): Promise<Store> {
  if (databaseUrl) return openPostgresStore(databaseUrl, { poolSize: 10 });
  dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-inference-'));
  process.on('exit', () => rmSync(dataDir!, { recursive: true, force: true }));
  return openSqliteStore(dataDir, { backgroundCheckpoints: { everyMs: 1000, onError: (m) => process.stderr.write(`checkpoint: ${m}\n`) } });
}

/** The default org at tier 3 (a limit the bench never reaches) and a key of it, once per database. */
async function benchKey(app: Awaited<ReturnType<typeof buildApp>>): Promise<string> {
  if (process.env.BENCH_KEY) return process.env.BENCH_KEY;
  const { org } = await app.services.orgs.ensureDefaultOrg();
  await app.services.orgs.update(org.id, { tier: 3 });
  return (await app.services.keys.create({ orgId: org.id })).value;
}

async function serveApp(port: number): Promise<{ port: number; key: string; close(): Promise<void> }> {
  const store = await openBenchStore();
  const config = defaultControlPlaneConfig({ dataDir: dataDir ?? tmpdir(), databaseUrl, rateLimitTier3: 100_000_000, inferenceMaxInFlight: 1024 });
  const app = await buildApp({
    config,
    store,
    logger: false,
    clusterWorker: cluster.isWorker,
    replicas: {
      directory: { ready: (f = {}) => replicas.filter((r) => f.model === undefined || r.model === f.model) },
      plan: { desired: (model, q, pool) => replicas.filter((r) => r.model === model && r.quantization === q && r.pool === pool).length },
    },
  });
  const key = await benchKey(app);
  await app.listen({ host: '127.0.0.1', port });
  return {
    port: (app.server.address() as AddressInfo).port,
    key,
    close: async () => {
      await app.close();
      await store.close();
    },
  };
}

if (workers > 1 && cluster.isPrimary) {
  // The key is made once, before the workers start; they share one port picked here.
  const setup = await serveApp(0);
  await setup.close();
  const port = await freePort();
  process.env.BENCH_KEY = setup.key;
  process.env.BENCH_PORT = String(port);
  const primary = startPrimary({ workers, log: createLogger('warn', 'bench-primary'), drainMs: 5_000 });
  await primary.ready;
  serveUntilStopped({ port, key: setup.key } satisfies InferenceServerInfo, async () => {
    primary.stop('bench done');
    await primary.exited;
  });
} else if (cluster.isWorker) {
  const served = await serveApp(Number(process.env.BENCH_PORT));
  process.send?.(WORKER_READY);
  process.on('SIGTERM', () => void served.close().finally(() => process.exit(0)));
} else {
  const served = await serveApp(0);
  serveUntilStopped({ port: served.port, key: served.key } satisfies InferenceServerInfo, () => served.close());
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
