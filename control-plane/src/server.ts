// Starts the control plane: parse configuration, open the store, build the app, listen,
// and close gracefully on SIGTERM/SIGINT.
import { ConfigError } from '@svc/shared';
import { buildApp } from './app.js';
import { loadControlPlaneConfig, type ControlPlaneConfig } from './config.js';
import { openSqliteStore } from './store/sqlite/sqlite-store.js';

export async function startControlPlane(config: ControlPlaneConfig) {
  const store = openSqliteStore(config.dataDir);
  const app = await buildApp({ config, store });
  app.addHook('onClose', async () => store.close());
  const { org, created } = await app.services.orgs.ensureDefaultOrg();
  await app.listen({ host: config.httpHost, port: config.httpPort });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.httpPort;
  const baseUrl = config.publicBaseUrl || `http://${config.httpHost}:${port}`;
  app.log.info({ org: org.id, base_url: baseUrl, data_dir: config.dataDir }, 'control plane listening');
  if (created || (await app.services.keys.list(org.id)).length === 0) {
    process.stderr.write(
      [
        '',
        `Created organization "${org.name}" (${org.id}) in ${config.dataDir}.`,
        'Create your first admin key with:',
        '  npx svcctl keys create --admin --json',
        `then: curl -H "Authorization: Bearer $KEY" ${baseUrl}/v1/models`,
        '',
      ].join('\n'),
    );
  }
  return { app, store, baseUrl };
}

async function main(): Promise<void> {
  let config: ControlPlaneConfig;
  try {
    config = loadControlPlaneConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`control plane: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const { app } = await startControlPlane(config);
  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    process.stderr.write(`control plane failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
