// A bench helper process: the real control plane whose replica directory holds the
// replicas named in BENCH_REPLICAS (JSON: [{baseUrl, model, quantization, image}]), as
// agents would report them. Prints {port, key} when ready; exits when its stdin closes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { buildApp, defaultControlPlaneConfig, openSqliteStore } from '@svc/control-plane';
import type { LiveReplica } from '../../control-plane/src/inference/replica-source.js';
import { serveUntilStopped } from './helper-process.js';

export interface InferenceServerInfo {
  port: number;
  key: string;
}

const wanted = JSON.parse(process.env.BENCH_REPLICAS ?? '[]') as Array<Pick<LiveReplica, 'baseUrl' | 'model' | 'quantization' | 'image'>>;
const replicas: LiveReplica[] = wanted.map((r, i) => ({ apiKey: undefined, ...r, id: `rep_bench${i}`, pool: 'na', nodeId: 'node_bench', engine: 'cpu' }));

const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-inference-'));
process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }));
const config = defaultControlPlaneConfig({ dataDir, rateLimitTier3: 100_000_000, inferenceMaxInFlight: 1024 });
const store = openSqliteStore(dataDir, { backgroundCheckpoints: { everyMs: 1000, onError: (m) => process.stderr.write(`checkpoint: ${m}\n`) } });
const app = await buildApp({
  config,
  store,
  logger: false,
  replicas: {
    directory: { ready: (f = {}) => replicas.filter((r) => f.model === undefined || r.model === f.model) },
    plan: { desired: (model, q, pool) => replicas.filter((r) => r.model === model && r.quantization === q && r.pool === pool).length },
  },
});
const { org } = await app.services.orgs.ensureDefaultOrg();
await app.services.orgs.update(org.id, { tier: 3 });
const { value: key } = await app.services.keys.create({ orgId: org.id });
await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as AddressInfo;
serveUntilStopped({ port, key } satisfies InferenceServerInfo, async () => {
  await app.close();
  await store.close();
});
