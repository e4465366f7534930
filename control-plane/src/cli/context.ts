// What every svcctl command works on: the local data dir (SVC_DATA_DIR or --data-dir),
// opened with the same store and services as the server.
import { createLogger } from '@svc/shared';
import { loadControlPlaneConfig } from '../config.js';
import { buildServices, type Services } from '../app.js';
import { openSqliteStore } from '../store/sqlite/sqlite-store.js';
import type { Store } from '../store/store.js';

export interface CliContext {
  store: Store;
  services: Services;
}

export async function withContext<T>(dataDir: string | undefined, fn: (ctx: CliContext) => Promise<T>): Promise<T> {
  const env = dataDir ? { ...process.env, SVC_DATA_DIR: dataDir } : process.env;
  const config = loadControlPlaneConfig(env);
  const store = openSqliteStore(config.dataDir);
  try {
    const log = createLogger('warn', 'svcctl', process.stderr);
    return await fn({ store, services: buildServices({ config, store }, log) });
  } finally {
    await store.close();
  }
}
