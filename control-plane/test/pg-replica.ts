// One control plane of several on one PostgreSQL database, as one replica behind a load
// balancer: its own store (pool, listener and leader-election connections), listening on
// a port of its own. For the suites that run three in one process.
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppDeps } from '../src/app.js';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../src/config.js';
import { openPostgresStore, type PostgresStore } from '../src/store/postgres/postgres-store.js';

export interface PgReplica {
  app: FastifyInstance;
  store: PostgresStore;
  baseUrl: string;
  /** Set by a test that closed it, so the suite does not close it again. */
  closed: boolean;
}

export async function startPgReplica(url: string, settings: Partial<ControlPlaneConfig>, deps: Partial<Omit<AppDeps, 'config' | 'store'>> = {}): Promise<PgReplica> {
  const store = await openPostgresStore(url, { poolSize: 4 });
  const config = defaultControlPlaneConfig({ databaseUrl: url, httpPort: 0, logLevel: 'silent', replicas: 'none', ...settings });
  const app = await buildApp({ logger: false, ...deps, config, store });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  return { app, store, baseUrl: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, closed: false };
}

/** Closes the replicas a test did not close itself. */
export async function closePgReplicas(replicas: readonly PgReplica[]): Promise<void> {
  for (const r of replicas) {
    if (r.closed) continue;
    await r.app.close();
    await r.store.close();
  }
}
