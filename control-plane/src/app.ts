// Builds the control-plane application: plugins, then services, then routes.
// server.ts only listens and closes; tests build the app and listen on port 0.
import { hostname } from 'node:os';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { Gauge } from 'prom-client';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ApiError, createLogger, fastifyLoggerOptions, newId, systemClock, type Clock } from '@svc/shared';
import type { ControlPlaneConfig } from './config.js';
import { ChangeFeed } from './changes.js';
import { ALONE, type Membership } from './fleet-share.js';
import { soleLeader, type Leadership } from './leadership.js';
import { DirectorySync } from './replicas/directory-sync.js';
import { installCors } from './http/cors.js';
import { parseJsonBody } from './http/json-body.js';
import { trustedProxies } from './http/trusted-proxies.js';
import { clientErrorHandler, refuseConnect } from './http/client-errors.js';
import { errorHandler, frameworkErrors, installClosingGuard, installNotFound } from './http/error-handler.js';
import { installUnreadBodyGuard } from './http/unread-body.js';
import { installMetrics, type ServiceMetrics } from './http/metrics.js';
import { openApiOptions } from './http/openapi.js';
import { ErrorEnvelope } from './http/schemas.js';
import { buildValidator } from './http/validation.js';
import { KeyService } from './keys/key-service.js';
import { KeyVerifier } from './keys/key-verifier.js';
import { DEFAULT_CATALOG_PATH, loadCatalog, type Catalog } from './models/catalog.js';
import { ModelService, type LiveCapacity } from './models/model-service.js';
import { EnrollmentService } from './nodes/enrollment-service.js';
import { NodeService } from './nodes/node-service.js';
import { installRemediation } from './remediation/install.js';
import { AgentTaskDispatcher } from './instances/agent-dispatcher.js';
import { InstanceService } from './instances/instance-service.js';
import { DEFAULT_SKU_CATALOG_PATH, loadSkuCatalog, type SkuCatalog } from './instances/sku-catalog.js';
import { billingRoutes } from './routes/billing.js';
import { instanceRoutes } from './routes/instances.js';
import { skuRoutes } from './routes/skus.js';
import { OrgService } from './orgs/org-service.js';
import { resolveDesiredReplicas } from './replicas/desired.js';
import { LiveReplicaDirectory, type ReplicaDirectory } from './replicas/replica-directory.js';
import { ReplicaService, replicaInventory, type ReplicaLogger } from './replicas/replica-service.js';
import { Idempotency } from './pipeline/idempotency.js';
import { UnknownKeyGuard } from './pipeline/unknown-key-guard.js';
import { RateLimiter } from './pipeline/rate-limit.js';
import { TokenLimiter } from './pipeline/token-limit.js';
import { BalanceGuard } from './billing/spending.js';
import { BillingService } from './billing/billing-service.js';
import { previousPeriod, SlaService } from './billing/sla-service.js';
import { InvoiceService } from './billing/invoice-service.js';
import { accrualBoundaries } from './billing/accrual.js';
import { BILLING_BALANCE_LOW } from './webhooks/event-types.js';
import { installPipeline } from './pipeline/index.js';
import { echoRequestId, genReqId } from './pipeline/request-id.js';
import './pipeline/types.js';
import { adminKeyRoutes } from './routes/admin-keys.js';
import { adminOrgRoutes } from './routes/admin-org.js';
import { adminUserRoutes } from './routes/admin-users.js';
import { UserService } from './users/user-service.js';
import { modelRoutes } from './routes/models.js';
import { opsRoutes } from './routes/ops.js';
import { mergedMetricsSource } from './cluster/merged-metrics.js';
import { publicStatusRoutes } from './status/public-routes.js';
import { OPS_PREFIX, opsApiRoutes } from './routes/ops-api.js';
import { webhookRoutes } from './routes/webhooks.js';
import { inferenceRoutes } from './routes/inference.js';
import { SchemaBudget } from './inference/schema-budget.js';
import { buildInference, type Inference } from './inference/inference.js';
import { servingPlan, type ServingPlan } from './inference/replica-source.js';
import type { Store } from './store/store.js';
import { installWebhookDelivery } from './webhooks/delivery-lifecycle.js';
import { buildTargetPolicy, type Resolver } from './webhooks/target-policy.js';
import { WebhookService } from './webhooks/webhook-service.js';

export interface AppDeps {
  config: ControlPlaneConfig;
  store: Store;
  clock?: Clock;
  catalog?: Catalog;
  capacity?: LiveCapacity;
  /** Live model-server replicas and where replicas are wanted; none by default. */
  replicas?: { directory: ReplicaDirectory; plan: ServingPlan };
  /** Resolves webhook hosts at subscription and at every send; the system DNS by default (tests play a rebinding one). */
  webhookResolver?: Resolver;
  /** Fastify logger setting; defaults to JSON logs at the configured level. */
  logger?: FastifyServerOptions['logger'];
  /** The app owns the store: it closes it after every other close hook (the last usage flush, the webhook worker). */
  closeStore?: boolean;
  /**
   * A worker of cluster/primary.ts (SVC_WORKERS > 1): GET /metrics answers with every
   * worker's metrics, merged by the primary, instead of this process's alone.
   */
  clusterWorker?: boolean;
}

export interface Services {
  orgs: OrgService;
  keys: KeyService;
  users: UserService;
  models: ModelService;
  verifier: KeyVerifier;
  rateLimiter: RateLimiter;
  tokenLimiter: TokenLimiter;
  balanceGuard: BalanceGuard;
  billing: BillingService;
  sla: SlaService;
  invoices: InvoiceService;
  idempotency: Idempotency;
  unknownKeys: UnknownKeyGuard;
  webhooks: WebhookService;
  enrollment: EnrollmentService;
  nodes: NodeService;
  instances: InstanceService;
  skuCatalog: SkuCatalog;
  /** Attached to the agent gateway by server.ts; unattached, every node counts as disconnected. */
  taskDispatcher: AgentTaskDispatcher;
  /** Model-server replicas: reconciler, agent reports, svcctl reads; `replicas.ready()` is the directory too. */
  replicas: ReplicaService;
  /** The router's view: replicas running and passing their latest health check (in memory, hot path). */
  replicaDirectory: ReplicaDirectory;
  inference: Inference;
  /** Key and org change notices (this process's, and on PostgreSQL every process's). */
  changes: ChangeFeed;
}

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
    /** The public /metrics registry and its hooks (server.ts attaches the agent gateway). */
    serviceMetrics: ServiceMetrics;
  }
}

export const API_VERSION = '1.0.0';

/** How long after a month ends the leader waits before closing it, when several processes record usage. */
const MONTH_END_GRACE_MS = 10_000;

/** `log` receives what services report outside a request (fastify's logger in the server). */
/**
 * `membership`: the control-plane processes sharing the store (the leader election knows
 * them); limits that are not shared through the store are divided among them.
 */
export function buildServices(deps: AppDeps, log: ReplicaLogger = createLogger('warn', 'control-plane'), membership: () => Membership = () => ALONE): Services {
  const { config, store } = deps;
  const clock = deps.clock ?? systemClock;
  const changes = new ChangeFeed();
  const catalog = deps.catalog ?? loadCatalog(config.modelCatalog || DEFAULT_CATALOG_PATH);
  const skuCatalog = loadSkuCatalog(config.skuCatalog || DEFAULT_SKU_CATALOG_PATH);
  const nodes = new NodeService(store.nodes, clock);
  const taskDispatcher = new AgentTaskDispatcher();
  // Desired replicas are checked against the catalog here: a typo is a start-up error (ConfigError).
  const desired = resolveDesiredReplicas(config.replicas, catalog);
  const replicaDirectory = new LiveReplicaDirectory();
  const replicas = new ReplicaService(
    store.replicas,
    catalog,
    desired,
    replicaInventory(nodes, store.nodes),
    taskDispatcher,
    replicaDirectory,
    clock,
    { cpuThreads: config.cpuEngineThreads, stopGraceMs: config.replicaStopGraceMs },
    log,
  );
  const models = new ModelService(catalog, deps.capacity ?? replicaDirectory, clock);
  const balanceGuard = new BalanceGuard(store.ledger, clock, (account) => {
    const balance = account.creditedNanos - account.spentNanos;
    store.events
      .append({
        id: newId('evt'),
        type: BILLING_BALANCE_LOW,
        orgId: account.orgId,
        subject: account.orgId,
        data: { balance: balance / 1e9, balance_nanos: balance, threshold: account.lowBalanceNanos! / 1e9, currency: 'usd', mode: account.mode },
        createdAt: clock.now(),
      })
      .catch((err: unknown) => log.error({ err, org: account.orgId }, 'recording billing.balance_low failed'));
  });
  // Shared by every process on PostgreSQL (store.rateLimits); in memory on SQLite.
  const tokenLimiter = new TokenLimiter({ 2: config.tokenLimitTier2, 3: config.tokenLimitTier3 }, clock, store.rateLimits);
  return {
    orgs: new OrgService(store, clock, changes),
    keys: new KeyService(store, clock, changes),
    users: new UserService(store, clock, changes),
    models,
    verifier: new KeyVerifier(store, clock, config.keyCacheMs, changes),
    rateLimiter: new RateLimiter({ 2: config.rateLimitTier2, 3: config.rateLimitTier3 }, clock, store.rateLimits),
    tokenLimiter,
    balanceGuard,
    billing: new BillingService(store.ledger, clock, balanceGuard),
    sla: new SlaService(store, clock),
    invoices: new InvoiceService(store.ledger, clock),
    idempotency: new Idempotency(store.idempotency, clock, {
      windowSeconds: config.idempotencyWindowSeconds,
      waitSeconds: config.idempotencyWaitSeconds,
      leaseSeconds: config.idempotencyLeaseSeconds,
      maxAnswerBytes: config.idempotencyMaxAnswerBytes,
    }),
    unknownKeys: new UnknownKeyGuard(clock),
    webhooks: new WebhookService(store, clock, buildTargetPolicy(config.mode, config.webhookAllowedTargets), deps.webhookResolver),
    enrollment: new EnrollmentService(store.nodes, clock, config.nodeTokenTtlSeconds),
    nodes,
    instances: new InstanceService(
      store.instances,
      skuCatalog,
      { nodes: () => nodes.candidates() },
      taskDispatcher,
      clock,
      {
        defaultImage: config.defaultInstanceImage,
        terminationGraceMs: config.terminationGraceMs,
        gpuQuotaOf: async (orgId) => (await store.orgs.get(orgId))?.gpuQuota ?? config.orgMaxGpus,
        upFront: (amountMicros) => balanceGuard.upFrontAdmission(amountMicros * 1_000),
      },
      log,
    ),
    skuCatalog,
    taskDispatcher,
    replicas,
    replicaDirectory,
    inference: buildInference({
      config,
      store,
      clock,
      models,
      replicas: deps.replicas ?? { directory: replicaDirectory, plan: servingPlan(desired) },
      log,
      onServed: (ctx, tokens) => tokenLimiter.settle(ctx.keyId, ctx.requestId, tokens),
      membership,
    }),
    changes,
  };
}


export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, store } = deps;
  const clock = deps.clock ?? systemClock;
  const app = Fastify({
    logger: deps.logger ?? fastifyLoggerOptions(config.logLevel, 'control-plane', config.logFormat),
    genReqId,
    requestIdHeader: false,
    bodyLimit: config.bodyLimitBytes,
    // proxy-addr semantics over a list; an empty list trusts no one (the socket address).
    trustProxy: trustedProxies(config.trustProxy).length > 0 ? trustedProxies(config.trustProxy) : false,
    // Our own closing guard answers in the envelope (installClosingGuard).
    return503OnClosing: false,
    frameworkErrors,
    clientErrorHandler,
    // Fastify's factory type wants Ajv's own signature; ours is the same at run time.
    schemaController: { compilersFactory: { buildValidator: buildValidator as never } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Which process runs the singletons below, and how many processes share the store.
  // Released last on close (onClose hooks run last-registered first), after the
  // singletons stopped, so a successor starts clean.
  let leadership: Leadership;
  try {
    leadership = store.campaign
      ? await store.campaign({ retryMs: config.leaderRetryMs, onError: (err) => app.log.warn({ err }, 'leader election: the database could not be asked') })
      : soleLeader;
  } catch (err) {
    if (deps.closeStore) await store.close();
    throw err;
  }
  const services = buildServices(deps, app.log, () => leadership.membership());
  app.decorate('services', services);
  // onClose hooks run last-registered first: registered first, the store closes last,
  // after the hooks below have flushed usage and token settlements and stopped workers.
  if (deps.closeStore) app.addHook('onClose', async () => store.close());
  app.addHook('onClose', async () => leadership.close());
  const replicaName = `${hostname()}:${process.pid}`;
  const announceLeadership = (leader: boolean): void => {
    if (leader) app.log.info({ replica: replicaName }, 'this replica is the leader: it runs the instance sweep, replica reconciler, webhook sending, remediation and month end');
    else app.log.warn({ replica: replicaName }, 'this replica is no longer the leader');
  };
  if (store.campaign) {
    if (leadership.isLeader()) announceLeadership(true);
    leadership.onChange(announceLeadership);
  }

  // Changes committed by other processes (PostgreSQL): evict cached keys and orgs, and
  // keep the replica directory equal to the store.
  if (store.onChange) {
    const sync = new DirectorySync(store.replicas, services.replicas.directory, (err) => app.log.warn({ err }, 'refreshing the replica directory failed'));
    const unsubscribe = await store.onChange((change) => {
      if (change.kind === 'key') services.changes.emit('key', change.id);
      else if (change.kind === 'org') services.changes.emit('org', change.id);
      else if (change.kind === 'replica') sync.changed(change.id);
      else {
        services.changes.emit('reset');
        void sync.resync();
      }
    });
    app.addHook('onClose', async () => unsubscribe());
  }
  app.decorateRequest('principal', null);
  app.decorateRequest('idempotencyClaim', null);
  app.decorateRequest('bodyChars', 0);

  // Plugins: validation, errors, JSON parsing, request ids, metrics, CORS, OpenAPI.
  app.setErrorHandler(errorHandler);
  installNotFound(app);
  refuseConnect(app.server);
  // JSON only: fastify's text/plain parser would let a string body reach validation.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // What was sent, also without a Content-Length (chunked): the token limit's estimate reads it.
    request.bodyChars = (body as string).length;
    try {
      done(null, parseJsonBody(body as string, request.headers['content-encoding']));
    } catch (err) {
      done(err as ApiError, undefined);
    }
  });
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body === undefined && request.method === 'POST') request.body = {};
    done();
  });
  app.addHook('onRequest', echoRequestId);
  installClosingGuard(app);
  installUnreadBodyGuard(app);
  const metrics = installMetrics(app, {
    clock,
    knownModels: new Set(services.models.catalog.models.map((m) => m.id)),
    desiredReplicas: resolveDesiredReplicas(config.replicas, services.models.catalog),
    replicas: () => services.replicas.list({ includeEnded: false, limit: 100_000 }),
    instances: () => store.instances.listActive(),
    nodes: () => store.nodes.listNodes(),
    deliveryBacklog: () => store.webhooks.deliveryBacklog(),
  });
  services.inference.recorder.observe((ctx, served) => metrics.inference.served(ctx, served));
  app.decorate('serviceMetrics', metrics);
  new Gauge({
    name: 'svc_control_plane_leader',
    help: 'Whether this control-plane process is the leader that runs the singletons (1) or not (0); with SVC_WORKERS, the sum over the workers',
    registers: [metrics.registry],
    collect() {
      this.set(leadership.isLeader() ? 1 : 0);
    },
  });
  new Gauge({
    name: 'svc_control_plane_processes',
    help: "Control-plane processes on this database, as this one last counted them (itself included); each sends a model-server replica an even part of SVC_INFERENCE_MAX_IN_FLIGHT. Below the processes you run: one lost its database connection",
    registers: [metrics.registry],
    aggregator: 'max',
    collect() {
      this.set(leadership.membership().count);
    },
  });
  await installCors(app);
  app.addSchema(ErrorEnvelope);
  await app.register(swagger, openApiOptions({ version: API_VERSION, publicBaseUrl: config.publicBaseUrl }));
  await app.register(swaggerUi, { routePrefix: '/docs' });

  // Routes outside the API-key pipeline.
  const exposition = deps.clusterWorker ? mergedMetricsSource(metrics.registry) : () => metrics.registry.metrics();
  await app.register(opsRoutes(store, { contentType: metrics.registry.contentType, text: exposition }));
  // The public status pages: key-less, outside /v1.
  await app.register(publicStatusRoutes({ fleet: store, desired: services.replicas.desired, skus: services.skuCatalog.skus, cacheMs: config.statusCacheMs, clock }));

  // /ops/v1: the operator API, for operator keys only (its own auth hook, no /v1 pipeline).
  await app.register(opsApiRoutes({ services, store, config, clock }), { prefix: OPS_PREFIX });

  // /v1: the request pipeline, in order, then the routes.
  await app.register(
    async (v1) => {
      installPipeline(v1, services);
      await v1.register(modelRoutes(services.models));
      await v1.register(adminKeyRoutes(services.keys));
      await v1.register(adminOrgRoutes(services.orgs, services.billing));
      await v1.register(adminUserRoutes(services.users));
      await v1.register(webhookRoutes(services.webhooks));
      await v1.register(instanceRoutes(services.instances, store.instances, services.sla));
      await v1.register(skuRoutes(services.skuCatalog, { nodes: () => services.nodes.candidates() }, store.instances));
      const clock = deps.clock ?? systemClock;
      await v1.register(
        billingRoutes({
          instances: store.instances,
          ledger: store.ledger,
          invoices: services.invoices,
          issuer: config.billingIssuer,
          orgName: async (orgId) => (await store.orgs.get(orgId))?.name ?? orgId,
          now: () => clock.now(),
          flushUsage: () => services.inference.recorder.flush(),
        }),
      );
      await v1.register(inferenceRoutes({ models: services.models, chat: services.inference.chat, embeddings: services.inference.embeddings, responses: services.inference.responses, usage: store.usage, recorder: services.inference.recorder, clientStallMs: config.inferenceClientStallMs, schemaBudget: new SchemaBudget(config.inferenceSchemaBytesPerMinute, clock) }));
    },
    { prefix: '/v1' },
  );

  app.addHook('onClose', async () => services.inference.close());

  installWebhookDelivery(app, { config, store, clock, models: services.models.catalog.models, resolver: deps.webhookResolver, onAttempt: metrics.webhookAttempt, leadership });

  // Housekeeping that keeps memory and tables bounded.
  const housekeeping = setInterval(() => {
    const failed = (err: unknown) => app.log.warn({ err }, 'rate-limit sweep failed');
    services.rateLimiter.sweep().catch(failed);
    services.tokenLimiter.sweep().catch(failed);
    store.idempotency.purgeExpired(clock.now()).catch((err: unknown) => app.log.warn({ err }, 'idempotency purge failed'));
  }, 60_000);
  housekeeping.unref();
  app.addHook('onClose', async () => clearInterval(housekeeping));
  app.addHook('onClose', async () => services.tokenLimiter.close());

  // The billing tick, on the leader. Each new hour: running on-demand instances are billed
  // up to it (and up to the month's start first, so a month's compute is on its own
  // invoice; billing/accrual.ts), and SLA credits held back at a month end are issued for
  // instances whose bill has settled since (billing/sla-service.ts). Month end: that
  // accrual, then SLA credits of the month that ended, then its invoices, once per month
  // (the store bills an instance's seconds once, keeps one credit per instance and month,
  // one invoice per org and month). With several processes the leader also waits out
  // every replica's last usage batch of the month (each flushes within milliseconds; the
  // grace is generous).
  let accruedTo: number | null = null;
  let heldCheckedAt: number | null = null;
  let closedPeriod: string | null = null;
  let ticking = false;
  const monthEndGraceMs = store.campaign ? MONTH_END_GRACE_MS : 0;
  const billingTick = async (): Promise<void> => {
    const boundary = accrualBoundaries(clock.now()).at(-1)!;
    if (boundary !== accruedTo) {
      const accrued = await services.instances.accrueOnDemand();
      if (accrued > 0) app.log.info({ lines: accrued, to: new Date(boundary).toISOString() }, 'running on-demand instances billed');
      accruedTo = boundary;
    }
    const period = previousPeriod(clock.now());
    if (period.id !== closedPeriod && clock.now() >= period.end + monthEndGraceMs) {
      const issued = await services.sla.issueCredits(period);
      if (issued > 0) app.log.info({ period: period.id, issued }, 'SLA credits issued');
      await services.inference.recorder.flush();
      const finalized = await services.invoices.finalize(period);
      if (finalized.length > 0) app.log.info({ period: period.id, invoices: finalized.length }, 'invoices finalized');
      closedPeriod = period.id;
    }
    if (closedPeriod === period.id && boundary !== heldCheckedAt) {
      const held = await services.sla.issueHeldCredits();
      if (held > 0) app.log.info({ issued: held }, 'SLA credits held back at a month end issued');
      heldCheckedAt = boundary;
    }
  };
  const monthEnd = setInterval(() => {
    if (!leadership.isLeader() || ticking) return;
    ticking = true;
    billingTick()
      .catch((err: unknown) => {
        // A new leader, or the next tick, runs it all again: every step is idempotent.
        accruedTo = null;
        app.log.error({ err }, 'billing tick (on-demand accrual, SLA credits, invoices) failed');
      })
      .finally(() => {
        ticking = false;
      });
  }, config.slaCreditCheckMs);
  monthEnd.unref();
  app.addHook('onClose', async () => clearInterval(monthEnd));

  // Idempotency claims of requests still running stay ours while this process lives.
  const leases = setInterval(() => {
    services.idempotency.renewLeases().catch((err: unknown) => app.log.warn({ err }, 'idempotency lease renewal failed'));
  }, (config.idempotencyLeaseSeconds * 1000) / 3);
  leases.unref();
  app.addHook('onClose', async () => clearInterval(leases));

  // Instances: stops waiting for their node (or recorded by svcctl), and reservations that expired; on the leader.
  const instanceSweep = setInterval(() => {
    if (!leadership.isLeader()) return;
    services.instances
      .deliverPendingStops()
      .then(() => services.instances.expireDue())
      .catch((err: unknown) => app.log.error({ err }, 'instance sweep failed'));
  }, 1_000);
  instanceSweep.unref();
  app.addHook('onClose', async () => clearInterval(instanceSweep));

  // Replicas: the directory starts from the store; then desired vs actual, every interval.
  await services.replicas.load();
  const replicaSweep = setInterval(() => {
    if (!leadership.isLeader()) return;
    services.replicas.reconcile().catch((err: unknown) => app.log.error({ err }, 'replica reconcile failed'));
  }, config.replicaReconcileMs);
  replicaSweep.unref();
  app.addHook('onClose', async () => clearInterval(replicaSweep));

  installRemediation(app, { config, store, clock, leadership });

  return app;
}
