// GET /v1/models and GET /v1/models/{model_id}: any valid key, public keys included.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { POOLS } from '../models/catalog.js';
import { deprecationHeaders, type ModelService } from '../models/model-service.js';
import { ListOf, StringEnum, responses } from '../http/schemas.js';

const Model = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('model'),
    created: Type.Integer(),
    owned_by: Type.String(),
    family: Type.String(),
    context_window: Type.Integer(),
    quantizations: Type.Array(Type.String()),
    pools: Type.Array(Type.String(), { description: 'Pools with live capacity; pin one with X-Service-Pool.' }),
    modalities: Type.Array(Type.String()),
    rate_card_id: Type.String(),
    dimensions: Type.Optional(Type.Integer({ description: 'Embedding models: vector length.' })),
    // A nullable object as `type: [object, null]`, not anyOf: the serializer would try each branch.
    deprecation: Type.Unsafe<{ announced_at: string; shutdown_at: string; replacement: string; notice: string } | null>({
      type: ['object', 'null'],
      properties: {
        announced_at: { type: 'string' },
        shutdown_at: { type: 'string' },
        replacement: { type: 'string' },
        notice: { type: 'string' },
      },
    }),
  },
  { $id: 'Model' },
);

export function modelRoutes(models: ModelService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(Model);
    const config = { publicKey: true };

    app.get(
      '/models',
      {
        config,
        schema: {
          tags: ['models'],
          operationId: 'listModels',
          summary: 'List the models your organization may call',
          querystring: Type.Object(
            { pool: Type.Optional(StringEnum(POOLS)), family: Type.Optional(Type.String({ maxLength: 64 })) },
            { additionalProperties: false },
          ),
          response: responses({ 200: ListOf(Type.Ref(Model)) }),
        },
      },
      async (request) => ({ object: 'list' as const, data: models.list(request.principal!.org, request.query) }),
    );

    app.get(
      '/models/:model_id',
      {
        config,
        schema: {
          tags: ['models'],
          operationId: 'retrieveModel',
          summary: 'Retrieve one model; a scheduled shutdown also sets Deprecation and Sunset headers',
          params: Type.Object({ model_id: Type.String({ minLength: 1, maxLength: 128 }) }),
          response: responses({ 200: Type.Ref(Model) }),
        },
      },
      async (request, reply) => {
        const view = models.get(request.principal!.org, request.params.model_id);
        reply.headers(deprecationHeaders(view));
        return view;
      },
    );
  };
}
