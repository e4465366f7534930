// Builds the control-plane application: plugins, then services, then routes.
// server.ts only listens and closes; tests build the app and listen on port 0.
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ApiError, createLogger, loggerOptions, systemClock, type Clock } from '@svc/shared';
import type { ControlPlaneConfig } from './config.js';
import { ChangeFeed } from './changes.js';
import { installCors } from './http/cors.js';
import { parseJsonBody } from './http/json-body.js';
import { trustedProxies } from './http/trusted-proxies.js';
import { clientErrorHandler, refuseConnect } from './http/client-errors.js';
import { errorHandler, frameworkErrors, installClosingGuard, installNotFound } from './http/error-handler.js';
import { installMetrics } from './http/metrics.js';
import { ErrorEnvelope } from './http/schemas.js';
import { buildValidator } from './http/validation.js';
import { KeyService } from './keys/key-service.js';
import { KeyVerifier } from './keys/key-verifier.js';
import { DEFAULT_CATALOG_PATH, loadCatalog, type Catalog } from './models/catalog.js';
import { ModelService, type LiveCapacity } from './models/model-service.js';
import { EnrollmentService } from './nodes/enrollment-service.js';
import { NodeService } from './nodes/node-service.js';
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
import { RateLimiter } from './pipeline/rate-limit.js';
import { installPipeline } from './pipeline/index.js';
import { echoRequestId, genReqId } from './pipeline/request-id.js';
import './pipeline/types.js';
import { adminKeyRoutes } from './routes/admin-keys.js';
import { adminOrgRoutes } from './routes/admin-org.js';
import { modelRoutes } from './routes/models.js';
import { opsRoutes } from './routes/ops.js';
import { webhookRoutes } from './routes/webhooks.js';
import { inferenceRoutes } from './routes/inference.js';
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
}

export interface Services {
  orgs: OrgService;
  keys: KeyService;
  models: ModelService;
  verifier: KeyVerifier;
  rateLimiter: RateLimiter;
  idempotency: Idempotency;
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
}

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
}

export const API_VERSION = '1.0.0';

/** `log` receives what services report outside a request (fastify's logger in the server). */
export function buildServices(deps: AppDeps, log: ReplicaLogger = createLogger('warn', 'control-plane')): Services {
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
  return {
    orgs: new OrgService(store, clock, changes),
    keys: new KeyService(store, clock, changes),
    models,
    verifier: new KeyVerifier(store, clock, config.keyCacheMs, changes),
    rateLimiter: new RateLimiter({ 2: config.rateLimitTier2, 3: config.rateLimitTier3 }, clock),
    idempotency: new Idempotency(store.idempotency, clock, {
      windowSeconds: config.idempotencyWindowSeconds,
      waitSeconds: config.idempotencyWaitSeconds,
      leaseSeconds: config.idempotencyLeaseSeconds,
    }),
    webhooks: new WebhookService(store, clock, buildTargetPolicy(config.mode, config.webhookAllowedTargets), deps.webhookResolver),
    enrollment: new EnrollmentService(store.nodes, clock, config.nodeTokenTtlSeconds),
    nodes,
    instances: new InstanceService(
      store.instances,
      skuCatalog,
      { nodes: () => nodes.candidates() },
      taskDispatcher,
      clock,
      { defaultImage: config.defaultInstanceImage, terminationGraceMs: config.terminationGraceMs },
      log,
    ),
    skuCatalog,
    taskDispatcher,
    replicas,
    replicaDirectory,
    inference: buildInference({ config, store, clock, models, replicas: deps.replicas ?? { directory: replicaDirectory, plan: servingPlan(desired) }, log }),
  };
}


export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, store } = deps;
  const clock = deps.clock ?? systemClock;
  const app = Fastify({
    logger: deps.logger ?? loggerOptions(config.logLevel, 'control-plane'),
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

  const services = buildServices(deps, app.log);
  app.decorate('services', services);
  app.decorateRequest('principal', null);
  app.decorateRequest('idempotencyClaim', null);

  // Plugins: validation, errors, JSON parsing, request ids, metrics, CORS, OpenAPI.
  app.setErrorHandler(errorHandler);
  installNotFound(app);
  refuseConnect(app.server);
  // JSON only: fastify's text/plain parser would let a string body reach validation.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as ApiError, undefined);
    }
  });
  app.addHook('preValidation', async (request) => {
    if (request.body === undefined && request.method === 'POST') request.body = {};
  });
  app.addHook('onRequest', echoRequestId);
  installClosingGuard(app);
  const metrics = installMetrics(app);
  await installCors(app);
  app.addSchema(ErrorEnvelope);
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Inference and GPU Compute Service API',
        version: API_VERSION,
        description: 'OpenAI-compatible inference, the model catalog, GPU instances and key administration.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key' } } },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  // Routes outside the API-key pipeline.
  await app.register(opsRoutes(store, metrics));

  // /v1: the request pipeline, in order, then the routes.
  await app.register(
    async (v1) => {
      installPipeline(v1, services);
      await v1.register(modelRoutes(services.models));
      await v1.register(adminKeyRoutes(services.keys));
      await v1.register(adminOrgRoutes(services.orgs));
      await v1.register(webhookRoutes(services.webhooks));
      await v1.register(instanceRoutes(services.instances, store.instances));
      await v1.register(skuRoutes(services.skuCatalog, { nodes: () => services.nodes.candidates() }, store.instances));
      await v1.register(billingRoutes(store.instances));
      await v1.register(inferenceRoutes({ models: services.models, chat: services.inference.chat, embeddings: services.inference.embeddings, usage: store.usage, recorder: services.inference.recorder }));
    },
    { prefix: '/v1' },
  );

  app.addHook('onClose', async () => services.inference.close());

  installWebhookDelivery(app, { config, store, clock, models: services.models.catalog.models, resolver: deps.webhookResolver });

  // Housekeeping that keeps memory and tables bounded.
  const housekeeping = setInterval(() => {
    services.rateLimiter.sweep();
    store.idempotency.purgeExpired(clock.now()).catch((err: unknown) => app.log.warn({ err }, 'idempotency purge failed'));
  }, 60_000);
  housekeeping.unref();
  app.addHook('onClose', async () => clearInterval(housekeeping));

  // Idempotency claims of requests still running stay ours while this process lives.
  const leases = setInterval(() => {
    services.idempotency.renewLeases().catch((err: unknown) => app.log.warn({ err }, 'idempotency lease renewal failed'));
  }, (config.idempotencyLeaseSeconds * 1000) / 3);
  leases.unref();
  app.addHook('onClose', async () => clearInterval(leases));

  // Instances: stops waiting for their node (or recorded by svcctl), and reservations that expired.
  const instanceSweep = setInterval(() => {
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
    services.replicas.reconcile().catch((err: unknown) => app.log.error({ err }, 'replica reconcile failed'));
  }, config.replicaReconcileMs);
  replicaSweep.unref();
  app.addHook('onClose', async () => clearInterval(replicaSweep));

  return app;
}
