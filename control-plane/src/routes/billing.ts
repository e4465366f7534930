// GET /v1/billing/charges (billing:read): the org's charges ledger, newest first.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { microsToUsd } from '../billing/pricing.js';
import type { InstanceStore } from '../store/instance-store.js';
import { responses } from '../http/schemas.js';

const Charge = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('charge'),
    instance_id: Type.String(),
    kind: Type.String({ description: 'reservation, extension, on_demand, or refund (a credit: negative amount, e.g. a failed reservation)' }),
    amount: Type.Number({ description: 'USD' }),
    currency: Type.Literal('usd'),
    description: Type.String(),
    created_at: Type.String(),
  },
  { $id: 'Charge' },
);

export function billingRoutes(store: InstanceStore): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(Charge);
    app.get(
      '/billing/charges',
      {
        config: { scope: 'billing:read' },
        schema: {
          tags: ['billing'],
          summary: "List your organization's charges, newest first",
          querystring: Type.Object(
            { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })), after: Type.Optional(Type.String({ maxLength: 64 })) },
            { additionalProperties: false },
          ),
          response: responses({
            200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Type.Ref(Charge)), has_more: Type.Boolean(), next_cursor: Type.Union([Type.String(), Type.Null()]) }),
          }),
        },
      },
      async (request) => {
        const page = await store.listCharges(request.principal!.org.id, { limit: request.query.limit ?? 20, ...(request.query.after ? { after: request.query.after } : {}) });
        return {
          object: 'list' as const,
          data: page.data.map((c) => ({
            id: c.id,
            object: 'charge' as const,
            instance_id: c.instanceId,
            kind: c.kind,
            amount: microsToUsd(c.amountMicros),
            currency: 'usd' as const,
            description: c.description,
            created_at: new Date(c.createdAt).toISOString(),
          })),
          has_more: page.hasMore,
          next_cursor: page.hasMore ? page.data.at(-1)!.id : null,
        };
      },
    );
  };
}
