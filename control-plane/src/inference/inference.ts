// Builds the inference half of the control plane from configuration: the upstream HTTP
// client, the router over the live replicas, the usage recorder and the two services.
import type { Clock } from '@svc/shared';
import type { ControlPlaneConfig } from '../config.js';
import { partOf, type Membership } from '../fleet-share.js';
import { quantizationsByPrice } from '../models/catalog.js';
import type { ModelService } from '../models/model-service.js';
import type { Store } from '../store/store.js';
import { ChatCompletionService, type InferenceDeps } from './chat-completions.js';
import { EmbeddingsService } from './embeddings.js';
import { ResponsesService } from './responses/responses-service.js';
import type { ReplicaDirectory, ServingPlan } from './replica-source.js';
import { Router } from './router.js';
import { UpstreamClient } from './upstream.js';
import { UsageRecorder, type UsageContext } from './usage.js';

export interface Inference {
  router: Router;
  recorder: UsageRecorder;
  upstream: UpstreamClient;
  chat: ChatCompletionService;
  embeddings: EmbeddingsService;
  responses: ResponsesService;
  close(): Promise<void>;
}

/** How long closing waits for requests still at a replica to end and record their usage. */
const IN_FLIGHT_GRACE_MS = 5_000;
const MAX_EJECT_MS = 30_000;
const PROBE_TIMEOUT_MS = 2_000;
const RESPONSES_PURGE_MS = 3_600_000;

export function buildInference(deps: {
  config: ControlPlaneConfig;
  store: Store;
  clock: Clock;
  models: ModelService;
  replicas: { directory: ReplicaDirectory; plan: ServingPlan };
  log: { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
  /** Told each served request's real token count. */
  onServed?: (ctx: UsageContext, totalTokens: number) => void;
  /** The control-plane processes sharing each replica's in-flight limit. */
  membership: () => Membership;
}): Inference {
  const { config, models } = deps;
  const upstream = new UpstreamClient({
    connectTimeoutMs: config.inferenceConnectTimeoutMs,
    headersTimeoutMs: config.inferenceFirstByteTimeoutMs,
    bodyTimeoutMs: config.inferenceIdleTimeoutMs,
    connections: config.inferenceMaxInFlight,
  });
  const router = new Router(deps.replicas.directory, deps.replicas.plan, {
    poolOrder: config.poolOrder,
    maxOutstandingPerReplica: config.inferenceMaxInFlight,
    part: (limit) => partOf(limit, deps.membership()),
    maxTenantShare: config.inferenceMaxOrgShare,
    ejectMs: config.inferenceEjectMs,
    maxEjectMs: MAX_EJECT_MS,
    probe: (replica) => upstream.probe(replica.baseUrl, '/health', PROBE_TIMEOUT_MS),
    byPrice: (model) => quantizationsByPrice(model, models.rateCard(model)),
  });
  const recorder = new UsageRecorder(deps.store.usage, deps.clock, deps.log, undefined, deps.onServed);
  const inferenceDeps: InferenceDeps = {
    router,
    upstream,
    recorder,
    usageStore: deps.store.usage,
    clock: deps.clock,
    rateCard: (model) => models.rateCard(model),
    attempts: config.inferenceAttempts,
    onReplicaFailure: (replica, err) => deps.log.warn({ replica: replica.id, node: replica.nodeId, endpoint: replica.baseUrl, err: err.message }, 'replica failed a request; ejected'),
    defaultPool: config.poolOrder[0]!,
    sandboxDailyTokenCap: config.sandboxDailyTokens,
  };
  const chat = new ChatCompletionService(inferenceDeps);
  const responses = new ResponsesService({ chat, store: deps.store.responses, clock: deps.clock, retentionDays: config.responsesRetentionDays });
  // Reads skip expired responses; the purge only gives their space back.
  const purge = setInterval(() => {
    responses.purgeExpired().catch((err: unknown) => deps.log.warn({ err }, 'stored responses purge failed'));
  }, RESPONSES_PURGE_MS);
  purge.unref();
  return {
    router,
    recorder,
    upstream,
    chat,
    embeddings: new EmbeddingsService(inferenceDeps),
    responses,
    close: async () => {
      clearInterval(purge);
      router.close();
      // Requests still at a replica record their usage when they end: streams end at once
      // once their connections are closed (closeGracefully), whole completions run on to
      // the replica's answer. Waited for, within bounds, so their records are in the
      // last batch rather than written after the store closed.
      if (router.leasedCount > 0) {
        let timer: NodeJS.Timeout | undefined;
        const waited = await Promise.race([router.idle().then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), IN_FLIGHT_GRACE_MS)))]);
        clearTimeout(timer);
        if (!waited) deps.log.error({ requests: router.leasedCount, waited_ms: IN_FLIGHT_GRACE_MS }, 'inference requests still at a replica at shutdown; their usage is not recorded');
      }
      await recorder.flush();
      await upstream.close();
    },
  };
}
