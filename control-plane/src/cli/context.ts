// What every svcctl command works on: the local data dir (SVC_DATA_DIR or --data-dir),
// opened with the same store and services as the server.
import type { Command } from 'commander';
import { createLogger } from '@svc/shared';
import { loadControlPlaneConfig, type ControlPlaneConfig } from '../config.js';
import { buildServices, type Services } from '../app.js';
import { openSqliteStore } from '../store/sqlite/sqlite-store.js';
import type { Store } from '../store/store.js';

export interface CliContext {
  store: Store;
  services: Services;
  config: ControlPlaneConfig;
}

/** Runs `fn` on the data dir of `cmd`'s global --data-dir option, or SVC_DATA_DIR. */
export async function withContext<T>(cmd: Command, fn: (ctx: CliContext) => Promise<T>): Promise<T> {
  const dataDir = cmd.optsWithGlobals().dataDir as string | undefined;
  const env = dataDir ? { ...process.env, SVC_DATA_DIR: dataDir } : process.env;
  const config = loadControlPlaneConfig(env);
  const store = openSqliteStore(config.dataDir);
  try {
    const log = createLogger('warn', 'svcctl', process.stderr);
    return await fn({ store, services: buildServices({ config, store }, log), config });
  } finally {
    await store.close();
  }
}
