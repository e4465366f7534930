// Webhook subscriptions of an org: create (the secret is shown once), list, read,
// delete, rotate the secret with an overlap, list deliveries, redeliver. URLs are
// checked against the target policy (SSRF) before anything is stored.
import type { Clock } from '@svc/shared/clock';
import { ApiError } from '@svc/shared/errors';
import { newId } from '@svc/shared/ids';
import type { Store } from '../store/store.js';
import { ALL_EVENT_TYPES, EVENT_TYPES } from './event-types.js';
import { generateSecret } from './signing.js';
import { refusedUrl, webhookResolver, type Resolver, type TargetPolicy } from './target-policy.js';
import type { DeliveryHistory, DeliveryRecord, WebhookSubscriptionRecord } from './webhook-store.js';

/** Webhook subscriptions one organization may hold (Stripe allows 16 endpoints). */
export const MAX_WEBHOOKS_PER_ORG = 16;
export const DEFAULT_SECRET_OVERLAP_SECONDS = 86_400;
export const MAX_SECRET_OVERLAP_SECONDS = 7 * 86_400;
export const MAX_URL_LENGTH = 2048;
/**
 * A delivery with this many attempts in the past hour is not redelivered until the oldest
 * of them is an hour old: each redelivery is a request the provider sends, and they were
 * unbounded (the default retry schedule makes at most 4 attempts in a delivery's first hour).
 */
export const MAX_DELIVERY_ATTEMPTS_PER_HOUR = 10;
const HOUR_MS = 3_600_000;

export interface CreateWebhookInput {
  orgId: string;
  url: string;
  eventTypes: string[];
  description?: string | null;
}

export interface CreatedWebhook {
  subscription: WebhookSubscriptionRecord;
  secret: string;
}

export interface RotatedSecret extends CreatedWebhook {
  oldSecretExpiresAt: number;
}

/** ["*"] alone, or known event types without repeats. */
export function checkEventTypes(eventTypes: readonly string[]): string[] {
  if (eventTypes.length === 0) throw new ApiError('invalid_request', 'event_types needs at least one event type', { param: 'event_types' });
  if (eventTypes.includes(ALL_EVENT_TYPES)) {
    if (eventTypes.length > 1) {
      throw new ApiError('invalid_request', `"${ALL_EVENT_TYPES}" means every event type; give it alone`, { param: 'event_types' });
    }
    return [ALL_EVENT_TYPES];
  }
  eventTypes.forEach((type, i) => {
    if (!(EVENT_TYPES as readonly string[]).includes(type)) {
      throw new ApiError('invalid_request', `unknown event type "${type}"; event types are: ${EVENT_TYPES.join(', ')} or "*"`, {
        param: `event_types[${i}]`,
      });
    }
  });
  return [...new Set(eventTypes)];
}

export class WebhookService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly policy: TargetPolicy,
    private readonly resolve: Resolver = webhookResolver(policy),
  ) {}

  async create(input: CreateWebhookInput): Promise<CreatedWebhook> {
    const eventTypes = checkEventTypes(input.eventTypes);
    await this.checkUrl(input.url);
    if (!(await this.store.orgs.get(input.orgId))) throw new ApiError('not_found', `no org with id ${input.orgId}`, { param: 'org' });
    // Every subscription multiplies the org's events into deliveries the provider sends,
    // so they are few, as Stripe's endpoints are. Checked here (a cheap early answer) and
    // again by the store in the insert's transaction, where parallel creates are counted
    // one after another: the cap is exact.
    const mayAdd = (held: number): void => {
      if (held >= MAX_WEBHOOKS_PER_ORG) {
        throw new ApiError('invalid_request', `an organization has at most ${MAX_WEBHOOKS_PER_ORG} webhook subscriptions; delete one first`, { param: 'url', code: 'too_many_webhooks' });
      }
    };
    mayAdd((await this.store.webhooks.listSubscriptions(input.orgId)).length);
    const now = this.clock.now();
    const id = newId('wh');
    const secret = generateSecret();
    const subscription = await this.store.webhooks.createSubscription(
      {
        id,
        orgId: input.orgId,
        url: input.url,
        eventTypes,
        description: input.description ?? null,
        status: 'enabled',
        disabledReason: null,
        createdAt: now,
      },
      { subscriptionId: id, secret, createdAt: now, expiresAt: null },
      mayAdd,
    );
    return { subscription, secret };
  }

  async list(orgId?: string): Promise<WebhookSubscriptionRecord[]> {
    return this.store.webhooks.listSubscriptions(orgId);
  }

  /** A subscription by id; with `orgId`, other orgs' subscriptions are as good as missing. */
  async get(id: string, orgId?: string): Promise<WebhookSubscriptionRecord> {
    const subscription = await this.store.webhooks.getSubscription(id);
    if (!subscription || (orgId !== undefined && subscription.orgId !== orgId)) {
      throw new ApiError('not_found', `no webhook with id ${id}`);
    }
    return subscription;
  }

  async delete(id: string, orgId?: string): Promise<WebhookSubscriptionRecord> {
    const subscription = await this.get(id, orgId);
    if (!(await this.store.webhooks.deleteSubscription(id))) throw new ApiError('not_found', `no webhook with id ${id}`);
    return subscription;
  }

  async rotateSecret(id: string, overlapSeconds = DEFAULT_SECRET_OVERLAP_SECONDS, orgId?: string): Promise<RotatedSecret> {
    const subscription = await this.get(id, orgId);
    const now = this.clock.now();
    const secret = generateSecret();
    const oldSecretExpiresAt = now + overlapSeconds * 1000;
    const rotated = await this.store.webhooks.rotateSecret(id, { subscriptionId: id, secret, createdAt: now, expiresAt: null }, oldSecretExpiresAt);
    if (!rotated) throw new ApiError('not_found', `no webhook with id ${id}`);
    return { subscription, secret, oldSecretExpiresAt };
  }

  async deliveries(id: string, options: { limit: number; after?: string }, orgId?: string): Promise<DeliveryHistory[]> {
    await this.get(id, orgId);
    if (options.after !== undefined) {
      const after = await this.store.webhooks.getDelivery(options.after);
      if (!after || after.subscriptionId !== id) {
        throw new ApiError('invalid_request', `after: no delivery ${options.after} of webhook ${id}`, { param: 'after' });
      }
    }
    return this.store.webhooks.listDeliveries(id, options);
  }

  /** Sends the delivery again now, from the start of the retry schedule; same webhook-id. */
  async redeliver(id: string, deliveryId: string, orgId?: string): Promise<DeliveryRecord> {
    const subscription = await this.get(id, orgId);
    const delivery = await this.store.webhooks.getDelivery(deliveryId);
    if (!delivery || delivery.subscriptionId !== id) throw new ApiError('not_found', `no delivery ${deliveryId} of webhook ${id}`);
    if (subscription.status !== 'enabled') {
      throw new ApiError('invalid_request', `webhook ${id} is disabled (${subscription.disabledReason ?? 'no reason recorded'}); create a new one`);
    }
    const now = this.clock.now();
    const recent = await this.store.webhooks.attemptsSince(deliveryId, now - HOUR_MS + 1);
    if (recent.count >= MAX_DELIVERY_ATTEMPTS_PER_HOUR) {
      const retryAfter = Math.max(1, Math.ceil(((recent.oldestAt ?? now) + HOUR_MS - now) / 1000));
      throw new ApiError(
        'rate_limited',
        `delivery ${deliveryId} had ${recent.count} attempts in the past hour; a delivery is redelivered while it has had fewer than ${MAX_DELIVERY_ATTEMPTS_PER_HOUR}: retry in ${retryAfter} s`,
        { code: 'redelivery_limit', headers: { 'retry-after': String(retryAfter) } },
      );
    }
    const redelivered = await this.store.webhooks.redeliver(deliveryId, now);
    if (!redelivered) throw new ApiError('not_found', `no delivery ${deliveryId} of webhook ${id}`);
    return redelivered;
  }

  private async checkUrl(url: string): Promise<void> {
    if (url.length > MAX_URL_LENGTH) {
      throw new ApiError('invalid_request', `url is longer than ${MAX_URL_LENGTH} characters`, { param: 'url' });
    }
    const refused = await refusedUrl(url, this.policy, this.resolve);
    if (refused) throw new ApiError('invalid_request', refused, { param: 'url' });
  }
}
