// The server half of the "API pipeline overhead" section, run in a child process.
// It builds the real control-plane app, adds two routes that return the same body as
// GET /v1/models without the /v1 request pipeline (a bare handler, and the real route
// code), and prints {port, key} when ready.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { buildApp, defaultControlPlaneConfig, openSqliteStore } from '@svc/control-plane';
// Not exported by the package: the bench mounts the real route a second time, without
// the pipeline, to tell the route's own cost (schemas) from the pipeline's.
import { modelRoutes } from '../../control-plane/src/routes/models.js';
import { serveUntilStopped } from './helper-process.js';

export interface PipelineServerInfo {
  port: number;
  key: string;
}

const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-pipeline-'));
// 'exit' also fires after a failed start-up (uncaught error), so nothing is left behind.
process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }));
// A huge tier-3 limit: the limiter still runs on every request (its cost is what we
// measure) but never answers 429.
const config = defaultControlPlaneConfig({ dataDir, rateLimitTier3: 100_000_000 });
const store = openSqliteStore(dataDir);
// Logging off for every variant: we measure the pipeline, not pino.
const app = await buildApp({ config, store, logger: false });

const { org } = await app.services.orgs.ensureDefaultOrg();
const tier3 = await app.services.orgs.update(org.id, { tier: 3 });
const { value: key } = await app.services.keys.create({ orgId: org.id });

// Outside /v1, so none of the pipeline hooks run; app-wide hooks (request id echo,
// metrics, CORS) run on every variant alike.
app.get('/bench/models-bare', async () => ({ object: 'list', data: app.services.models.list(tier3, {}) }));

// The real GET /v1/models route (querystring validation, schema-driven serialization)
// at /bench/route/models, with only a synchronous hook that sets the principal the
// pipeline would have set.
const verified = await app.services.verifier.verify(key);
if (!verified.ok) throw new Error(`bench key does not verify: ${verified.reason}`);
const principal = verified.principal;
await app.register(
  async (route) => {
    route.addHook('onRequest', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
      request.principal = principal;
      done();
    });
    await route.register(modelRoutes(app.services.models));
  },
  { prefix: '/bench/route' },
);

await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as AddressInfo;
const info: PipelineServerInfo = { port, key };
serveUntilStopped(info, async () => {
  await app.close();
  await store.close();
});
