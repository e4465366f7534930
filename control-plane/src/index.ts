export { buildApp, buildServices, type AppDeps, type Services } from './app.js';
export { startControlPlane } from './server.js';
export { controlPlaneSettings, loadControlPlaneConfig, defaultControlPlaneConfig, type ControlPlaneConfig } from './config.js';
export { openSqliteStore } from './store/sqlite/sqlite-store.js';
export { openPostgresStore } from './store/postgres/postgres-store.js';
export { openStore } from './store/open-store.js';
export type { Store } from './store/store.js';
