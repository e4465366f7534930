// Starts the control plane: parse configuration, open the store, build the app, listen,
// and close gracefully on SIGTERM/SIGINT. With SVC_WORKERS > 1 (PostgreSQL only) this
// process becomes the primary of that many workers (cluster/primary.ts), each of which
// runs the same start below.
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { ConfigError, createLogger } from '@svc/shared';
import { AgentGateway } from './agents/gateway.js';
import { buildApp } from './app.js';
import { combineGatewayHooks } from './agents/combine-hooks.js';
import { instanceGatewayHooks } from './instances/gateway-hooks.js';
import { replicaGatewayHooks } from './replicas/gateway-hooks.js';
import { loadControlPlaneConfig, type ControlPlaneConfig } from './config.js';
import { describeStoreLocation, openStore } from './store/open-store.js';
import { startOperatorMetricsServer, type OperatorMetricsServer } from './nodes/operator-metrics-server.js';
import { startPrimary, WORKER_READY } from './cluster/primary.js';
import { resolveWorkerCount } from './cluster/worker-count.js';
import { closeGracefully } from './http/graceful-close.js';

/** How much longer than their drain the primary gives workers to record and close before it kills them. */
const WORKER_CLOSE_MARGIN_MS = 10_000;

export async function startControlPlane(config: ControlPlaneConfig) {
  let app: Awaited<ReturnType<typeof buildApp>> | undefined;
  const store = await openStore(config, {
    backgroundCheckpoints: { everyMs: 1000, onError: (message) => app?.log.warn({ err: message }, 'background WAL checkpoint failed; SQLite checkpoints in commits again') },
  });
  try {
    app = await buildApp({ config, store, closeStore: true, clusterWorker: cluster.isWorker });
  } catch (err) {
    await store.close();
    throw err;
  }
  // Replicas starting together on one database may both try to create the first org:
  // the one that loses finds the winner's on a second look.
  const { org, created } = await app.services.orgs.ensureDefaultOrg().catch(() => app!.services.orgs.ensureDefaultOrg());
  // The agent gateway (gRPC) checks its transport and timing settings before anything listens.
  let gateway: AgentGateway;
  let grpcPort: number;
  try {
    const gatewayLog = app.log.child({ component: 'agent-gateway' });
    gateway = new AgentGateway({
      config,
      store: store.nodes,
      enrollment: app.services.enrollment,
      log: gatewayLog,
      // Replicas on one PostgreSQL reach each other's agent streams through it.
      relay: config.databaseUrl ? new (await import('./agents/pg-session-relay.js')).PgSessionRelay(config.databaseUrl, gatewayLog) : undefined,
      ...combineGatewayHooks(instanceGatewayHooks(app.services.instances, app.log), replicaGatewayHooks(app.services.replicas, app.log)),
    });
    app.services.taskDispatcher.attach((nodeId, command) => gateway.send(nodeId, command));
    const sessions = gateway;
    app.serviceMetrics.attachAgents(() => sessions.sessionCount);
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
        fleet: store,
        desired: app.services.replicas.desired,
        refreshMs: config.operatorStatusRefreshMs,
        hostnames: config.operatorHostnames,
        log: app.log.child({ component: 'operator-listener' }),
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
  app.log.info({ org: org.id, base_url: baseUrl, grpc_port: grpcPort, store: describeStoreLocation(config) }, 'control plane listening');
  // Under SVC_WORKERS the first worker alone prints the first-run hint, not every one.
  if ((!cluster.isWorker || cluster.worker?.id === 1) && (created || (await app.services.keys.list(org.id)).length === 0)) {
    process.stderr.write(
      [
        '',
        `Created organization "${org.name}" (${org.id}) in ${describeStoreLocation(config)}.`,
        'Create your first admin key with:',
        '  npx svcctl keys create --admin --json',
        `then: curl -H "Authorization: Bearer $KEY" ${baseUrl}/v1/models`,
        '',
      ].join('\n'),
    );
  }
  return { app, store, baseUrl, gateway, grpcPort, operatorMetricsUrl: operatorMetrics?.url, operatorStatusUrl: operatorMetrics?.statusUrl };
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
  if (cluster.isPrimary) {
    const { count, reason } = resolveWorkerCount(config.workers, availableParallelism(), config.databaseUrl !== '');
    const log = reason || count > 1 ? createLogger(config.logLevel, 'control-plane', undefined, config.logFormat) : undefined;
    if (reason) log!.warn({ workers: 1 }, reason);
    if (count > 1) {
      log!.info({ workers: count }, 'starting workers');
      const primary = startPrimary({ workers: count, log: log!, drainMs: config.shutdownDrainMs + WORKER_CLOSE_MARGIN_MS });
      process.on('SIGTERM', () => primary.stop('SIGTERM'));
      process.on('SIGINT', () => primary.stop('SIGINT'));
      process.exit(await primary.exited);
    }
  }
  const { app } = await startControlPlane(config);
  // Under a primary: it restarts a worker that died before saying it was ready, differently.
  if (cluster.isWorker) process.send?.(WORKER_READY);
  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    closeGracefully(app, config.shutdownDrainMs, app.log).then(
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
