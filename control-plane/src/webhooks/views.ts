// How webhooks and their deliveries are shown on the API and by svcctl: snake_case,
// seconds for `created`, RFC 3339 for other times, and never a stored secret.
import { Type } from '@sinclair/typebox';
import { toRfc3339, toUnixSeconds } from '@svc/shared';
import { LISTED_ATTEMPTS_PER_DELIVERY, type DeliveryHistory, type WebhookSubscriptionRecord } from './webhook-store.js';

const rfc3339OrNull = (ms: number | null): string | null => (ms === null ? null : toRfc3339(ms));
const NullableString = Type.Union([Type.String(), Type.Null()]);

export const WebhookView = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('webhook'),
    url: Type.String(),
    event_types: Type.Array(Type.String()),
    description: NullableString,
    status: Type.String({ description: 'enabled, or disabled (the endpoint answered 410 Gone)' }),
    disabled_reason: NullableString,
    org_id: Type.String(),
    created: Type.Integer(),
  },
  { $id: 'Webhook' },
);

export function webhookView(subscription: WebhookSubscriptionRecord) {
  return {
    id: subscription.id,
    object: 'webhook' as const,
    url: subscription.url,
    event_types: subscription.eventTypes,
    description: subscription.description,
    status: subscription.status,
    disabled_reason: subscription.disabledReason,
    org_id: subscription.orgId,
    created: toUnixSeconds(subscription.createdAt),
  };
}

export const DeliveryView = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('webhook.delivery'),
    webhook_id: Type.String(),
    event_id: Type.String({ description: 'Also the webhook-id header of every attempt' }),
    event_type: Type.String(),
    subject: NullableString,
    status: Type.String({ description: 'pending, succeeded, or failed (given up)' }),
    attempt_count: Type.Integer({ description: 'Attempts made over the delivery\'s life, redeliveries included (attempts lists the latest of them)' }),
    next_attempt_at: NullableString,
    created: Type.Integer(),
    finished_at: NullableString,
    attempts: Type.Array(
      Type.Object({
        attempt: Type.Integer(),
        at: Type.String(),
        status_code: Type.Union([Type.Integer(), Type.Null()]),
        error: NullableString,
        duration_ms: Type.Integer(),
        next_retry_at: NullableString,
      }),
      { maxItems: LISTED_ATTEMPTS_PER_DELIVERY, description: `The latest ${LISTED_ATTEMPTS_PER_DELIVERY} attempts at most, oldest first` },
    ),
  },
  { $id: 'WebhookDelivery' },
);

export function deliveryView({ delivery, eventId, eventType, attempts }: DeliveryHistory) {
  return {
    id: delivery.id,
    object: 'webhook.delivery' as const,
    webhook_id: delivery.subscriptionId,
    event_id: eventId,
    event_type: eventType,
    subject: delivery.subject,
    status: delivery.status,
    attempt_count: delivery.attemptCount,
    next_attempt_at: rfc3339OrNull(delivery.nextAttemptAt),
    created: toUnixSeconds(delivery.createdAt),
    finished_at: rfc3339OrNull(delivery.finishedAt),
    attempts: attempts.map((a) => ({
      attempt: a.attempt,
      at: toRfc3339(a.startedAt),
      status_code: a.statusCode,
      error: a.error,
      duration_ms: a.durationMs,
      next_retry_at: rfc3339OrNull(a.nextAttemptAt),
    })),
  };
}
