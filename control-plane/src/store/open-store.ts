// Which engine keeps the control plane's state: PostgreSQL when SVC_DATABASE_URL is set
// (several replicas may share it), otherwise the embedded SQLite file under
// SVC_DATA_DIR. Everything above the store sees only the Store interface.
import type { Store } from './store.js';
import { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqlite-store.js';

export interface StoreSettings {
  dataDir: string;
  databaseUrl: string;
  databasePoolSize: number;
}

export async function openStore(settings: StoreSettings, sqliteOptions: SqliteStoreOptions = {}): Promise<Store> {
  if (settings.databaseUrl) {
    // Loaded only when asked for: svcctl on SQLite starts without the PostgreSQL client.
    const { openPostgresStore } = await import('./postgres/postgres-store.js');
    return openPostgresStore(settings.databaseUrl, { poolSize: settings.databasePoolSize });
  }
  return openSqliteStore(settings.dataDir, sqliteOptions);
}

/** Where the state lives, for logs and messages: never the URL itself (it may hold a password). */
export function describeStoreLocation(settings: StoreSettings): string {
  if (!settings.databaseUrl) return settings.dataDir;
  try {
    const url = new URL(settings.databaseUrl);
    return `PostgreSQL ${url.hostname}${url.port ? `:${url.port}` : ''}${url.pathname}`;
  } catch {
    return 'PostgreSQL';
  }
}
