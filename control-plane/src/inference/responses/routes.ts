// The Responses API routes: POST /v1/responses (stream: true answers with the semantic
// event stream), GET and DELETE /v1/responses/{response_id} for stored responses. Registered
// inside the inference routes, so they run the same pipeline (auth, scopes, rate limits,
// idempotency) as chat completions.
import { ApiError } from '@svc/shared';
import { nullAsAbsent } from '../../http/null-as-absent.js';
import { sendEventStream } from '../../http/event-stream.js';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { POOLS } from '../../models/catalog.js';
import type { ModelService } from '../../models/model-service.js';
import { responses as withErrors, StringEnum, tokenLimitedResponses } from '../../http/schemas.js';
import type { CallContext } from '../chat-completions.js';
import { ResponsesRequest } from './request.js';
import type { ResponsesService } from './responses-service.js';

const Usage = Type.Object({
  input_tokens: Type.Integer(),
  input_tokens_details: Type.Object({ cached_tokens: Type.Integer() }),
  output_tokens: Type.Integer(),
  output_tokens_details: Type.Object({ reasoning_tokens: Type.Integer() }),
  total_tokens: Type.Integer(),
});

const OutputItem = Type.Object(
  {
    id: Type.String(),
    type: StringEnum(['message', 'function_call'] as const),
    status: Type.String(),
    role: Type.Optional(Type.Literal('assistant')),
    content: Type.Optional(Type.Array(Type.Object({ type: Type.Literal('output_text'), text: Type.String(), annotations: Type.Array(Type.Unknown()) }))),
    call_id: Type.Optional(Type.String()),
    name: Type.Optional(Type.String()),
    arguments: Type.Optional(Type.String()),
  },
  { description: 'A message (its text in content) or a function_call (call_id, name, arguments).' },
);

export const ResponseSchema = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('response'),
    created_at: Type.Integer(),
    status: StringEnum(['completed', 'incomplete', 'failed', 'in_progress'] as const),
    error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
    incomplete_details: Type.Union([Type.Object({ reason: Type.String() }), Type.Null()]),
    model: Type.String(),
    pool: Type.String({ description: 'Service extension: the pool that served the request.' }),
    instructions: Type.Union([Type.String(), Type.Null()]),
    output: Type.Array(OutputItem),
    previous_response_id: Type.Union([Type.String(), Type.Null()]),
    store: Type.Boolean(),
    metadata: Type.Record(Type.String(), Type.String()),
    usage: Type.Union([Usage, Type.Null()]),
  },
  {
    $id: 'Response',
    additionalProperties: true,
    description:
      "OpenAI's Response object (also max_output_tokens, temperature, top_p, text, tools, tool_choice, parallel_tool_calls, user, truncation). With stream: true the answer is instead an SSE stream of semantic events (response.created ... response.completed), each with a sequence_number.",
  },
);

const InputItemListSchema = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(
      Type.Object(
        {
          id: Type.String(),
          type: StringEnum(['message', 'function_call', 'function_call_output'] as const),
          status: Type.Literal('completed'),
          role: Type.Optional(StringEnum(['user', 'system', 'assistant'] as const)),
          content: Type.Optional(Type.Array(Type.Object({ type: StringEnum(['input_text', 'output_text'] as const), text: Type.String() }, { additionalProperties: true }))),
          call_id: Type.Optional(Type.String()),
          name: Type.Optional(Type.String()),
          arguments: Type.Optional(Type.String()),
          output: Type.Optional(Type.String()),
        },
        { description: 'A message, a function_call, or a function_call_output.' },
      ),
    ),
    first_id: Type.Union([Type.String(), Type.Null()]),
    last_id: Type.Union([Type.String(), Type.Null()]),
    has_more: Type.Boolean(),
  },
  { description: "OpenAI's ResponseItemList." },
);

const ResponseIdParams = Type.Object({ response_id: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });

export interface ResponsesRoutesDeps {
  models: ModelService;
  responses: ResponsesService;
  callContext(request: FastifyRequest, reply: FastifyReply, user: string | undefined): CallContext;
  /** A stream whose client takes none of its bytes this long is ended. */
  clientStallMs: number;
}

export function responsesRoutes(deps: ResponsesRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(ResponseSchema);
    const tags = ['inference'];
    const json = (reply: FastifyReply, value: unknown) => reply.type('application/json; charset=utf-8').send(JSON.stringify(value));

    app.post(
      '/responses',
      {
        // Spends model tokens like chat completions: the same token limit and balance check.
        config: { scope: 'inference:write', tokenLimit: 'responses', billable: true },
        preValidation: nullAsAbsent,
        schema: {
          operationId: 'createResponse',
          tags,
          summary: 'Create a model response (OpenAI Responses API; stream: true answers with Server-Sent Events)',
          headers: Type.Object({ 'x-service-pool': Type.Optional(StringEnum(POOLS, { description: 'Pins a pool (data residency).' })) }),
          body: ResponsesRequest,
          response: tokenLimitedResponses(Type.Ref(ResponseSchema), 'The response; with stream: true, an SSE stream of response.* events.'),
        },
      },
      async (request, reply) => {
        const body = request.body;
        const model = deps.models.callable(request.principal!.org, body.model);
        const call = { ctx: deps.callContext(request, reply, body.user), model, body };
        if (body.stream !== true) return json(reply, await deps.responses.create(call));
        return sendEventStream(reply, await deps.responses.stream(call), deps.clientStallMs);
      },
    );

    app.get(
      '/responses/:response_id',
      {
        config: { scope: 'inference:read' },
        schema: {
          operationId: 'getResponse',
          tags,
          summary: 'Retrieve a stored response (store: true, within the retention period) of your organization',
          params: ResponseIdParams,
          querystring: Type.Object(
            {
              stream: Type.Optional(Type.Boolean({ description: 'Only false: a stored response is returned whole, never replayed as events.' })),
              include: Type.Optional(Type.Array(Type.String(), { maxItems: 0, description: 'Only empty: nothing extra can be included.' })),
            },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: Type.Ref(ResponseSchema) }),
        },
      },
      async (request, reply) => {
        // The official SDK's retrieve(id, { stream: true }) would otherwise read a JSON answer as an empty event stream.
        if (request.query.stream === true) throw new ApiError('invalid_request', 'stream is not supported when retrieving: a stored response is returned whole; read it without stream', { param: 'stream' });
        return json(reply, await deps.responses.get(request.principal!.org.id, request.params.response_id));
      },
    );

    app.get(
      '/responses/:response_id/input_items',
      {
        config: { scope: 'inference:read' },
        schema: {
          operationId: 'listResponseInputItems',
          tags,
          summary: 'List the input items a stored response was generated from (its earlier turns included), newest first',
          params: ResponseIdParams,
          querystring: Type.Object(
            {
              after: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'An item id from a page of this list: the items after it.' })),
              limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
              order: Type.Optional(StringEnum(['asc', 'desc'] as const, { description: 'desc (the default): newest first.' })),
              include: Type.Optional(Type.Array(Type.String(), { maxItems: 0, description: 'Only empty: nothing extra can be included.' })),
            },
            { additionalProperties: false },
          ),
          response: withErrors({ 200: InputItemListSchema }),
        },
      },
      async (request, reply) => {
        const { after, limit, order } = request.query;
        return json(reply, await deps.responses.inputItems(request.principal!.org.id, request.params.response_id, { ...(after ? { after } : {}), ...(limit ? { limit } : {}), ...(order ? { order } : {}) }));
      },
    );

    app.delete(
      '/responses/:response_id',
      {
        config: { scope: 'inference:write' },
        schema: {
          operationId: 'deleteResponse',
          tags,
          summary: 'Delete a stored response; it can no longer be read or chained on',
          params: ResponseIdParams,
          querystring: Type.Object({}, { additionalProperties: false }),
          response: withErrors({ 200: Type.Object({ id: Type.String(), object: Type.Literal('response'), deleted: Type.Literal(true) }) }),
        },
      },
      async (request) => deps.responses.delete(request.principal!.org.id, request.params.response_id),
    );
  };
}
