// Starts the control plane: parse configuration, open the store, build the app, listen,
// and close gracefully on SIGTERM/SIGINT.
import { ConfigError } from '@svc/shared';
import { AgentGateway } from './agents/gateway.js';
import { buildApp } from './app.js';
import { combineGatewayHooks } from './agents/combine-hooks.js';
import { instanceGatewayHooks } from './instances/gateway-hooks.js';
import { replicaGatewayHooks } from './replicas/gateway-hooks.js';
import { loadControlPlaneConfig, type ControlPlaneConfig } from './config.js';
import { openSqliteStore } from './store/sqlite/sqlite-store.js';
import { startOperatorMetricsServer, type OperatorMetricsServer } from './nodes/operator-metrics-server.js';

export async function startControlPlane(config: ControlPlaneConfig) {
  let app: Awaited<ReturnType<typeof buildApp>> | undefined;
  const store = openSqliteStore(config.dataDir, {
    backgroundCheckpoints: { everyMs: 1000, onError: (message) => app?.log.warn({ err: message }, 'background WAL checkpoint failed; SQLite checkpoints in commits again') },
  });
  app = await buildApp({ config, store });
  app.addHook('onClose', async () => store.close());
  const { org, created } = await app.services.orgs.ensureDefaultOrg();
  // The agent gateway (gRPC) checks its transport and timing settings before anything listens.
  let gateway: AgentGateway;
  let grpcPort: number;
  try {
    gateway = new AgentGateway({
      config,
      store: store.nodes,
      enrollment: app.services.enrollment,
      log: app.log.child({ component: 'agent-gateway' }),
      ...combineGatewayHooks(instanceGatewayHooks(app.services.instances, app.log), replicaGatewayHooks(app.services.replicas, app.log)),
    });
    app.services.taskDispatcher.attach((nodeId, command) => gateway.send(nodeId, command));
    grpcPort = await gateway.listen();
  } catch (err) {
    await app.close();
    throw err;
  }
  // preClose runs before every onClose hook: the gateway flushes telemetry before the store closes.
  app.addHook('preClose', async () => gateway.close());
  let operatorMetrics: OperatorMetricsServer | undefined;
  if (config.operatorMetricsPort !== 0) {
    try {
      operatorMetrics = await startOperatorMetricsServer({
        host: config.operatorMetricsHost,
        port: config.operatorMetricsPort,
        store: store.nodes,
        log: app.log.child({ component: 'operator-metrics' }),
      });
    } catch (err) {
      await app.close();
      throw err;
    }
    const listener = operatorMetrics;
    // Closed first, so a scrape does not read a store being closed.
    app.addHook('preClose', async () => listener.close());
  }
  await app.listen({ host: config.httpHost, port: config.httpPort });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.httpPort;
  const baseUrl = config.publicBaseUrl || `http://${config.httpHost}:${port}`;
  app.log.info({ org: org.id, base_url: baseUrl, grpc_port: grpcPort, data_dir: config.dataDir }, 'control plane listening');
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
  return { app, store, baseUrl, gateway, grpcPort, operatorMetricsUrl: operatorMetrics?.url };
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
    // Cross-field settings (gRPC transport, node timing) are checked as the gateway starts.
    if (err instanceof ConfigError) {
      process.stderr.write(`control plane: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`control plane failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
