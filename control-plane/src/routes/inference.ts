// The OpenAI-compatible inference API (spec 2.1-2.4, 4): POST /v1/chat/completions,
// POST /v1/embeddings, and the usage records they leave (GET /v1/usage). Routes check
// what a schema cannot and hand over to the services; streams go out as SSE with the
// pipeline's headers (rate limits included) before the first byte.
import { nullAsAbsent } from '../http/null-as-absent.js';
import { Type } from '@sinclair/typebox';
import { sendEventStream } from '../http/event-stream.js';
import type { SchemaBudget, SchemaMeter } from '../inference/schema-budget.js';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { POOLS, type Pool } from '../models/catalog.js';
import type { ModelService } from '../models/model-service.js';
import { ChatCompletionRequest, checkChatRequest } from '../inference/chat-request.js';
import type { CallContext, ChatCompletionService } from '../inference/chat-completions.js';
import { ClientDeparture } from '../inference/client-departure.js';
import { EmbeddingsRequest, planEmbeddings } from '../inference/embeddings-request.js';
import type { EmbeddingsService } from '../inference/embeddings.js';
import { requestMetadataView, usageView, type UsageRecorder } from '../inference/usage.js';
import { parseTimeRange } from '../http/time-param.js';
import { ApiError } from '@svc/shared';
import type { UsageStore } from '../store/usage-store.js';
import { StringEnum, responses, tokenLimitedResponses } from '../http/schemas.js';
import { responsesRoutes } from '../inference/responses/routes.js';
import type { ResponsesService } from '../inference/responses/responses-service.js';

const nullable = (type: string, description?: string) => Type.Unsafe<unknown>({ type: [type, 'null'], ...(description ? { description } : {}) });

const ToolCall = Type.Object({
  id: Type.String(),
  type: Type.Literal('function'),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
});

const TopLogprob = Type.Object({ token: Type.String(), logprob: Type.Number(), bytes: Type.Union([Type.Array(Type.Integer()), Type.Null()]) });
const Logprobs = Type.Union(
  [Type.Object({ content: Type.Union([Type.Array(Type.Object({ ...TopLogprob.properties, top_logprobs: Type.Array(TopLogprob) })), Type.Null()]) }), Type.Null()],
  { description: 'With logprobs: true, one entry per generated token; otherwise null.' },
);

const Usage = Type.Object({ prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() });

const ChatCompletion = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('chat.completion'),
    created: Type.Integer(),
    model: Type.String(),
    pool: Type.String({ description: 'Service extension: the pool that served the request.' }),
    system_fingerprint: Type.String({ description: 'Service extension: hash of model, quantization and runtime.' }),
    choices: Type.Array(
      Type.Object({
        index: Type.Integer(),
        message: Type.Object({
          role: Type.Literal('assistant'),
          content: nullable('string'),
          refusal: Type.Null({ description: 'Always null: the models here answer or decline in their content (OpenAI sends the field on every message).' }),
          annotations: Type.Array(Type.Unknown(), { maxItems: 0, description: 'Always empty (no web search here); OpenAI sends the field on every message.' }),
          tool_calls: Type.Optional(Type.Array(ToolCall)),
        }),
        logprobs: Type.Optional(Logprobs),
        finish_reason: Type.String({ description: 'stop, length or tool_calls' }),
      }),
    ),
    usage: Usage,
  },
  { $id: 'ChatCompletion', description: 'With stream: true the answer is instead an SSE stream of chat.completion.chunk objects ending with data: [DONE].' },
);

const EmbeddingList = Type.Object(
  {
    object: Type.Literal('list'),
    model: Type.String(),
    pool: Type.String(),
    data: Type.Array(
      Type.Object({
        object: Type.Literal('embedding'),
        index: Type.Integer(),
        embedding: Type.Union([Type.Array(Type.Number()), Type.String({ description: 'base64 of little-endian float32' })]),
      }),
    ),
    usage: Type.Object({ prompt_tokens: Type.Integer(), total_tokens: Type.Integer() }),
  },
  { $id: 'EmbeddingList' },
);

const UsageRecordView = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('usage_record'),
    created: Type.Integer(),
    request_id: Type.String(),
    key_id: Type.String(),
    kind: Type.String({ description: 'chat or embeddings' }),
    model: Type.String(),
    quantization: Type.String(),
    pool: Type.String(),
    prompt_tokens: Type.Integer(),
    completion_tokens: Type.Integer(),
    total_tokens: Type.Integer(),
    cost_usd: Type.Number({ description: "Priced by the model's rate card; 0 for sandbox keys." }),
    user: nullable('string', 'The request\'s `user` field.'),
    sandbox: Type.Boolean(),
  },
  { $id: 'UsageRecord' },
);

const RequestMetadata = Type.Object(
  {
    id: Type.String({ description: 'The request id (x-request-id of the answer).' }),
    object: Type.Literal('inference.request'),
    created: Type.Integer({ description: 'Unix seconds when the request finished.' }),
    status: Type.Literal('completed', { description: 'Only served requests are recorded; refused ones cost nothing and leave no record.' }),
    kind: Type.String({ description: 'chat or embeddings' }),
    key_id: Type.String(),
    model: Type.String(),
    quantization: Type.String(),
    pool: Type.String(),
    usage: Type.Object({ prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() }),
    cost_usd: Type.Number(),
    cost_nanos: Type.Integer({ description: 'Exact cost in nano-dollars (1e-9 USD).' }),
    duration_ms: Type.Union([Type.Integer(), Type.Null()], { description: "From the request's arrival to its last token." }),
    user: nullable('string', "The request's `user` field."),
    sandbox: Type.Boolean(),
  },
  { $id: 'InferenceRequest' },
);

/** The pool header; validation has already refused values outside na|eu|apac. */
const PoolHeaders = Type.Object({ 'x-service-pool': Type.Optional(StringEnum(POOLS, { description: 'Pins a pool (data residency).' })) });

export interface InferenceRoutesDeps {
  models: ModelService;
  chat: ChatCompletionService;
  embeddings: EmbeddingsService;
  responses: ResponsesService;
  usage: UsageStore;
  /** Flushed before usage is listed, so a client reads its own requests at once. */
  recorder: UsageRecorder;
  /** A stream whose client takes none of its bytes this long is ended (SVC_INFERENCE_CLIENT_STALL_MS). */
  clientStallMs: number;
  /** Bytes of JSON Schema new to the service an org may have checked a minute (SVC_INFERENCE_SCHEMA_BYTES_PER_MINUTE). */
  schemaBudget: SchemaBudget;
}

/** The caller, and a signal that fires if the client goes away before its answer is complete. */
export function callContext(request: FastifyRequest, reply: FastifyReply, user: string | undefined, schemaMeter?: SchemaMeter): CallContext {
  const { org, key } = request.principal!;
  const gone = new ClientDeparture();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) gone.depart();
  });
  return {
    orgId: org.id,
    keyId: key.id,
    requestId: request.id,
    sandbox: key.kind === 'test',
    user,
    // The org's default pool stands in for a header the request did not send.
    pool: (request.headers['x-service-pool'] as Pool | undefined) ?? org.defaultPool ?? undefined,
    signal: gone,
    startedAt: performance.now(),
    schemaMeter,
  };
}

export function inferenceRoutes(deps: InferenceRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(ChatCompletion);
    app.addSchema(EmbeddingList);
    app.addSchema(UsageRecordView);
    app.addSchema(RequestMetadata);
    const tags = ['inference'];
    // Every inference call's context carries its org's schema meter.
    const context = (request: FastifyRequest, reply: FastifyReply, user: string | undefined): CallContext =>
      callContext(request, reply, user, deps.schemaBudget.meterFor(request.principal!.org.id));
    await app.register(responsesRoutes({ models: deps.models, responses: deps.responses, callContext: context, clientStallMs: deps.clientStallMs }));

    app.post(
      '/chat/completions',
      {
        config: { scope: 'inference:write', tokenLimit: 'chat', billable: true },
        preValidation: nullAsAbsent,
        schema: {
          tags,
          operationId: 'createChatCompletion',
          summary: 'Create a chat completion (OpenAI-compatible; stream: true answers with Server-Sent Events)',
          headers: PoolHeaders,
          body: ChatCompletionRequest,
          response: tokenLimitedResponses(Type.Ref(ChatCompletion), 'The completion; with stream: true, an SSE stream of chat.completion.chunk objects ending with data: [DONE].'),
        },
      },
      async (request, reply) => {
        const body = request.body;
        const model = deps.models.callable(request.principal!.org, body.model);
        const ctx = context(request, reply, body.user);
        const { maxTokens } = checkChatRequest(body, model, ctx.schemaMeter);
        const call = { ctx, model, body, maxTokens };
        if (body.stream !== true) return deps.chat.complete(call);
        return sendEventStream(reply, await deps.chat.stream(call), deps.clientStallMs);
      },
    );

    app.post(
      '/embeddings',
      {
        preValidation: nullAsAbsent,
        config: { scope: 'inference:write', publicKey: true, tokenLimit: 'embeddings', billable: true },
        schema: {
          tags,
          operationId: 'createEmbedding',
          summary: 'Create embeddings for a string or up to 2,048 strings (OpenAI-compatible)',
          headers: PoolHeaders,
          body: EmbeddingsRequest,
          response: tokenLimitedResponses(Type.Ref(EmbeddingList), 'The embeddings, in input order.'),
        },
      },
      async (request, reply) => {
        const body = request.body;
        const model = deps.models.callable(request.principal!.org, body.model);
        const plan = planEmbeddings(body, model);
        const result = await deps.embeddings.create({ ctx: callContext(request, reply, body.user), model, body, plan });
        // Thousands of floats: JSON.stringify beats a schema serializer that must try both encodings.
        return reply.type('application/json; charset=utf-8').send(JSON.stringify(result));
      },
    );

    app.get(
      '/usage',
      {
        config: { scope: 'inference:read' },
        schema: {
          tags,
          operationId: 'listUsage',
          summary: "List your organization's inference usage records, newest first",
          querystring: Type.Object(
            {
              limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
              after: Type.Optional(Type.String({ maxLength: 64 })),
              model: Type.Optional(Type.String({ maxLength: 128 })),
              key_id: Type.Optional(Type.String({ maxLength: 64 })),
              from: Type.Optional(Type.String({ maxLength: 40, description: 'Records at or after this time (RFC 3339 or YYYY-MM-DD, UTC).' })),
              to: Type.Optional(Type.String({ maxLength: 40, description: 'Records before this time.' })),
            },
            { additionalProperties: false },
          ),
          response: responses({
            200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Type.Ref(UsageRecordView)), has_more: Type.Boolean(), next_cursor: Type.Union([Type.String(), Type.Null()]) }),
          }),
        },
      },
      async (request) => {
        const { limit = 20, after, model, key_id: keyId } = request.query;
        const range = parseTimeRange(request.query.from, request.query.to);
        await deps.recorder.flush();
        const page = await deps.usage.list(request.principal!.org.id, { limit, ...(after ? { after } : {}), ...(model ? { model } : {}), ...(keyId ? { keyId } : {}), ...range });
        return { object: 'list' as const, data: page.data.map(usageView), has_more: page.hasMore, next_cursor: page.hasMore ? page.data.at(-1)!.id : null };
      },
    );

    app.get(
      '/requests/:request_id',
      {
        config: { scope: 'inference:read' },
        schema: {
          tags,
          operationId: 'getRequest',
          summary: 'What one served inference request was: model, quantization, pool, tokens, cost, duration (by its x-request-id)',
          params: Type.Object({ request_id: Type.String({ minLength: 1, maxLength: 128 }) }),
          response: responses({ 200: Type.Ref(RequestMetadata) }),
        },
      },
      async (request) => {
        await deps.recorder.flush();
        const record = await deps.usage.byRequest(request.principal!.org.id, request.params.request_id);
        if (!record) throw new ApiError('not_found', `no served inference request ${request.params.request_id} in your organization`, { param: 'request_id' });
        return requestMetadataView(record);
      },
    );
  };
}
