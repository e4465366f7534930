// Webhook subscriptions of the caller's org (admin:write): create (secret shown once),
// list, read, delete, rotate the secret, list deliveries and their attempts, redeliver.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { toRfc3339 } from '@svc/shared';
import { ListOf, StringEnum, responses } from '../http/schemas.js';
import { ALL_EVENT_TYPES, EVENT_TYPES } from '../webhooks/event-types.js';
import { DeliveryView, WebhookView, deliveryView, webhookView } from '../webhooks/views.js';
import { LISTED_ATTEMPTS_PER_DELIVERY } from '../webhooks/webhook-store.js';
import { MAX_DELIVERY_ATTEMPTS_PER_HOUR } from '../webhooks/webhook-service.js';
import {
  DEFAULT_SECRET_OVERLAP_SECONDS,
  MAX_SECRET_OVERLAP_SECONDS,
  MAX_URL_LENGTH,
  type WebhookService,
} from '../webhooks/webhook-service.js';

const WebhookIdParams = Type.Object({ webhook_id: Type.String({ minLength: 1, maxLength: 64 }) });

const WithSecret = Type.Intersect([
  Type.Ref(WebhookView),
  Type.Object({
    secret: Type.Union([Type.String(), Type.Null()], {
      description: 'The signing secret (whsec_…). Shown only in this response; null in an idempotent replay, which never holds it.',
    }),
    secret_redacted: Type.Optional(Type.Literal(true, { description: 'Present in an idempotent replay: the secret was shown in the first answer only.' })),
  }),
]);

export function webhookRoutes(webhooks: WebhookService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(WebhookView);
    app.addSchema(DeliveryView);
    const config = { scope: 'admin:write' as const };
    // Answers that show the signing secret: an idempotent replay withholds it.
    const showsSecret = { ...config, secretFields: ['secret'] };
    const tags = ['webhooks'];

    app.post(
      '/webhooks',
      {
        config: showsSecret,
        schema: {
          tags,
          operationId: 'createWebhook',
          summary: 'Subscribe an HTTPS endpoint to events; the signing secret is shown once',
          body: Type.Object(
            {
              url: Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH }),
              event_types: Type.Array(StringEnum([...EVENT_TYPES, ALL_EVENT_TYPES] as const), {
                minItems: 1,
                maxItems: EVENT_TYPES.length + 1,
              }),
              description: Type.Optional(Type.String({ maxLength: 500 })),
            },
            { additionalProperties: false },
          ),
          response: responses({ 201: WithSecret }),
        },
      },
      async (request, reply) => {
        const { url, event_types, description } = request.body;
        const created = await webhooks.create({
          orgId: request.principal!.org.id,
          url,
          eventTypes: event_types,
          description: description ?? null,
        });
        return reply.code(201).send({ ...webhookView(created.subscription), secret: created.secret });
      },
    );

    app.get(
      '/webhooks',
      {
        config: showsSecret,
        schema: { tags, operationId: 'listWebhooks', summary: 'List the webhooks of your organization (no secrets)', response: responses({ 200: ListOf(Type.Ref(WebhookView)) }) },
      },
      async (request) => ({ object: 'list' as const, data: (await webhooks.list(request.principal!.org.id)).map(webhookView) }),
    );

    app.get(
      '/webhooks/:webhook_id',
      { config, schema: { tags, operationId: 'getWebhook', summary: 'Read a webhook', params: WebhookIdParams, response: responses({ 200: Type.Ref(WebhookView) }) } },
      async (request) => webhookView(await webhooks.get(request.params.webhook_id, request.principal!.org.id)),
    );

    app.delete(
      '/webhooks/:webhook_id',
      {
        config,
        schema: {
          tags,
          operationId: 'deleteWebhook',
          summary: 'Delete a webhook; pending deliveries to it are dropped',
          params: WebhookIdParams,
          response: responses({ 200: Type.Object({ id: Type.String(), object: Type.Literal('webhook'), deleted: Type.Literal(true) }) }),
        },
      },
      async (request) => {
        const deleted = await webhooks.delete(request.params.webhook_id, request.principal!.org.id);
        return { id: deleted.id, object: 'webhook' as const, deleted: true as const };
      },
    );

    app.post(
      '/webhooks/:webhook_id/rotate-secret',
      {
        config: showsSecret,
        schema: {
          tags,
          operationId: 'rotateWebhookSecret',
          summary: 'Issue a new signing secret; the old one keeps signing too for overlap_seconds (default 86400)',
          params: WebhookIdParams,
          body: Type.Object(
            {
              overlap_seconds: Type.Optional(
                Type.Integer({ minimum: 0, maximum: MAX_SECRET_OVERLAP_SECONDS, default: DEFAULT_SECRET_OVERLAP_SECONDS }),
              ),
            },
            { additionalProperties: false },
          ),
          response: responses({ 200: Type.Intersect([WithSecret, Type.Object({ old_secret_expires_at: Type.String() })]) }),
        },
      },
      async (request) => {
        const rotated = await webhooks.rotateSecret(request.params.webhook_id, request.body.overlap_seconds, request.principal!.org.id);
        return { ...webhookView(rotated.subscription), secret: rotated.secret, old_secret_expires_at: toRfc3339(rotated.oldSecretExpiresAt) };
      },
    );

    app.get(
      '/webhooks/:webhook_id/deliveries',
      {
        config,
        schema: {
          tags,
          operationId: 'listWebhookDeliveries',
          summary: `Deliveries of events to this webhook, newest first, each with its latest ${LISTED_ATTEMPTS_PER_DELIVERY} attempts`,
          params: WebhookIdParams,
          querystring: Type.Object(
            {
              limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
              after: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A delivery id: list the older ones' })),
            },
            { additionalProperties: false },
          ),
          response: responses({
            200: Type.Object({
              object: Type.Literal('list'),
              data: Type.Array(Type.Ref(DeliveryView)),
              has_more: Type.Boolean(),
              next_cursor: Type.Union([Type.String(), Type.Null()]),
            }),
          }),
        },
      },
      async (request) => {
        const limit = request.query.limit ?? 20;
        // One extra row says whether there is a next page.
        const rows = await webhooks.deliveries(
          request.params.webhook_id,
          { limit: limit + 1, after: request.query.after },
          request.principal!.org.id,
        );
        const data = rows.slice(0, limit).map(deliveryView);
        const hasMore = rows.length > limit;
        return { object: 'list' as const, data, has_more: hasMore, next_cursor: hasMore ? data.at(-1)!.id : null };
      },
    );

    app.post(
      '/webhooks/:webhook_id/deliveries/:delivery_id/redeliver',
      {
        config,
        schema: {
          tags,
          operationId: 'redeliverWebhookDelivery',
          summary: 'Send a delivery again now (same event, same webhook-id), from the start of the retry schedule',
          description: `Refused with 429 \`rate_limited\` (\`code: "redelivery_limit"\`, with \`retry-after\`) while the delivery has had ${MAX_DELIVERY_ATTEMPTS_PER_HOUR} or more attempts in the past hour.`,
          params: Type.Object({
            webhook_id: Type.String({ minLength: 1, maxLength: 64 }),
            delivery_id: Type.String({ minLength: 1, maxLength: 64 }),
          }),
          body: Type.Object({}, { additionalProperties: false }),
          response: responses({
            202: Type.Object({
              id: Type.String(),
              object: Type.Literal('webhook.delivery'),
              status: Type.String(),
              next_attempt_at: Type.Union([Type.String(), Type.Null()]),
            }),
          }),
        },
      },
      async (request, reply) => {
        const d = await webhooks.redeliver(request.params.webhook_id, request.params.delivery_id, request.principal!.org.id);
        return reply.code(202).send({
          id: d.id,
          object: 'webhook.delivery' as const,
          status: d.status,
          next_attempt_at: d.nextAttemptAt === null ? null : toRfc3339(d.nextAttemptAt),
        });
      },
    );
  };
}
