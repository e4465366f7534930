// Runs webhook delivery with the app, on the leader only (leadership.ts): when the app is
// ready and this process leads, due deprecations are announced and the delivery worker
// starts; when it closes or stops leading, the worker stops (attempts in flight get a
// short grace to finish; the rest are aborted and stay pending for the next leader).
import type { FastifyInstance } from 'fastify';
import type { Clock } from '@svc/shared';
import type { ControlPlaneConfig } from '../config.js';
import type { CatalogModel } from '../models/catalog.js';
import type { Store } from '../store/store.js';
import { soleLeader, whileLeading, type Leadership } from '../leadership.js';
import { DeliveryWorker, type DeliveryWorkerOptions } from './delivery-worker.js';
import { DeprecationAnnouncer } from './deprecation-announcer.js';
import { httpSender } from './http-sender.js';
import { parseSchedule } from './retry-schedule.js';
import { buildTargetPolicy, type Resolver } from './target-policy.js';

/** Deprecations are looked for at start and then this often (announced_at may lie ahead). */
const DEPRECATION_CHECK_MS = 60_000;

export interface WebhookDeliveryDeps {
  config: ControlPlaneConfig;
  store: Store;
  clock: Clock;
  models: readonly CatalogModel[];
  /** DNS for every send; the system's by default. */
  resolver?: Resolver | undefined;
  /** Told each recorded attempt's outcome (metrics). */
  onAttempt?: DeliveryWorkerOptions['onAttempt'];
  /** Whether this process sends; the only process always does. */
  leadership?: Leadership;
}

export function installWebhookDelivery(app: FastifyInstance, deps: WebhookDeliveryDeps): DeliveryWorker {
  const { config, store, clock } = deps;
  const announcer = new DeprecationAnnouncer(store, deps.models, clock);
  let lastDeprecationCheck = Number.NEGATIVE_INFINITY;
  const worker = new DeliveryWorker({
    store,
    clock,
    send: httpSender(buildTargetPolicy(config.mode, config.webhookAllowedTargets), Date.now, deps.resolver),
    schedule: parseSchedule(config.webhookRetrySchedule),
    timeoutMs: config.webhookTimeoutMs,
    pollMs: config.webhookPollMs,
    log: app.log.child({ component: 'webhooks' }),
    ...(deps.onAttempt ? { onAttempt: deps.onAttempt } : {}),
    onPoll: async () => {
      if (clock.now() - lastDeprecationCheck < DEPRECATION_CHECK_MS) return;
      lastDeprecationCheck = clock.now();
      const announced = await announcer.announceDue();
      if (announced.length > 0) app.log.info({ models: announced }, 'model deprecations announced');
    },
  });
  let stopWorker: (() => Promise<void>) | undefined;
  app.addHook('onReady', async () => {
    stopWorker = whileLeading(deps.leadership ?? soleLeader, () => worker.start(), () => worker.stop(), (err) =>
      app.log.error({ err }, 'starting or stopping webhook delivery with leadership failed'),
    );
  });
  app.addHook('onClose', async () => (stopWorker ? stopWorker() : worker.stop()));
  return worker;
}
