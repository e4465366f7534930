// GPU instances (spec 2.6, 3, 4; DESIGN section 4): create, list, read, terminate, extend.
import type { SlaService } from '../billing/sla-service.js';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiError } from '@svc/shared';
import { POOLS } from '../models/catalog.js';
import { INSTANCE_STATUSES, type InstanceStatus } from '../instances/lifecycle.js';
import { MAX_CREATE_HOURS, instanceView, type InstanceService } from '../instances/instance-service.js';
import type { ViewerRights } from '../instances/instance-access.js';
import type { InstanceStore } from '../store/instance-store.js';
import { StringEnum, responses } from '../http/schemas.js';
import { storedCompletion } from '../pipeline/idempotency.js';

const Instance = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('instance'),
    status: StringEnum(INSTANCE_STATUSES),
    failure_reason: Type.Union([Type.String(), Type.Null()], {
      description:
        'Why the instance is `failed`; on a `terminated` instance, why it ended without a terminate or expiry (its process exited, its node stopped it over its disk limit). Null otherwise.',
    }),
    sku: Type.String(),
    gpus: Type.Integer(),
    pool: Type.String(),
    mode: StringEnum(['on_demand', 'reserved'] as const),
    duration_hours: Type.Union([Type.Number(), Type.Null()]),
    image: Type.String(),
    labels: Type.Record(Type.String(), Type.String()),
    node_id: Type.Union([Type.String(), Type.Null()]),
    progress: Type.Union([Type.Object({ phase: Type.String(), fraction: Type.Union([Type.Number(), Type.Null()]) }), Type.Null()]),
    ssh: Type.Union([
      Type.Object(
        {
          host: Type.String(),
          port: Type.Integer(),
          user: Type.String({ description: 'the instance id' }),
          command: Type.String({ description: 'e.g. ssh -p 2222 inst_x@gpu7.example.com' }),
          host_key: Type.String({ description: 'the node\'s SSH host key, for known_hosts' }),
          host_key_fingerprint: Type.String({ description: 'SHA256:..., as ssh prints it' }),
        },
        { description: 'SSH into the instance; only while ready' },
      ),
      Type.Null(),
    ]),
    jupyter: Type.Union([
      Type.Object(
        {
          url: Type.String({ description: "the instance's own origin and path; with ?token= only for compute:write keys" }),
          token: Type.Union([Type.String(), Type.Null()], { description: 'runs code in the instance: null unless the key has compute:write' }),
          token_redacted: Type.Boolean({ description: 'true when the token was left out (a key without compute:write, events, webhooks)' }),
        },
        { description: 'Jupyter in the instance; only while ready' },
      ),
      Type.Null(),
    ]),
    jupyter_unavailable_reason: Type.Union([Type.String(), Type.Null()], { description: 'why jupyter is null on a ready instance' }),
    jupyter_redacted: Type.Optional(Type.Literal(true, { description: 'Present in an idempotent replay, which never holds the Jupyter token: GET the instance for it.' })),
    created_at: Type.String(),
    ready_at: Type.Union([Type.String(), Type.Null()]),
    expires_at: Type.Union([Type.String(), Type.Null()]),
    terminated_at: Type.Union([Type.String(), Type.Null()]),
    price: Type.Object({
      currency: Type.Literal('usd'),
      per_gpu_hour: Type.Number(),
      per_hour: Type.Number(),
      reservation_total: Type.Optional(Type.Number()),
    }),
    sla: Type.Optional(
      Type.Object(
        {
          period: Type.String({ description: 'The UTC month, YYYY-MM.' }),
          availability_percent: Type.Number({ description: 'Time ready over time it should have been ready this month so far; provider-caused outages count against it, tenant-caused stops do not.' }),
          target_percent: Type.Number({ description: '99.5 on demand, 99.9 reserved.' }),
          met: Type.Boolean(),
          downtime_seconds: Type.Integer(),
        },
        { description: 'Only on GET /v1/instances/{id}. A month below target is credited automatically after it ends (docs/billing.md).' },
      ),
    ),
  },
  { $id: 'Instance' },
);

const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export function instanceRoutes(instances: InstanceService, store: InstanceStore, sla: SlaService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(Instance);
    const tags = ['instances'];
    // Answers of a ready instance carry its Jupyter token (code execution): an idempotent replay withholds it.
    const write = { scope: 'compute:write' as const, secretFields: ['jupyter'] };
    const read = { scope: 'compute:read' as const };
    // The Jupyter token runs code in the instance: only keys that may write it see it.
    const viewer = (request: { principal?: { key: { scopes: readonly string[] } } | null }): ViewerRights => ({
      revealJupyterToken: request.principal?.key.scopes.includes('compute:write') ?? false,
    });

    app.post(
      '/instances',
      {
        config: { ...write, billable: true },
        schema: {
          tags,
          operationId: 'createInstance',
          summary: 'Create a GPU instance: on demand, or reserved for duration_hours (charged up front)',
          body: Type.Object(
            {
              sku: Type.String({ minLength: 1, maxLength: 64 }),
              gpus: Type.Integer({ enum: [1, 2, 4, 8] }),
              pool: Type.Optional(StringEnum(POOLS)),
              duration_hours: Type.Optional(Type.Number({ minimum: 1, maximum: MAX_CREATE_HOURS })),
              image: Type.Optional(
                Type.String({
                  minLength: 1,
                  maxLength: 512,
                  description: "An OCI image reference ([registry/]repository[:tag][@digest]) from a registry on public addresses; not an image ID (sha256:<hex>). The node runs a copy it already holds only when that copy came from this repository.",
                }),
              ),
              ssh_keys: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 16_384 }), { maxItems: 32 })),
              labels: Type.Optional(Type.Record(Type.String(), Type.String())),
            },
            { additionalProperties: false },
          ),
          response: responses({ 201: Type.Ref(Instance) }),
        },
      },
      async (request, reply) => {
        const { org, key } = request.principal!;
        // The answer commits with the instance: a retry after a crash finds it, never a second instance.
        const body = { ...request.body, pool: request.body.pool ?? org.defaultPool ?? undefined };
        const record = await instances.create(org.id, key.id, body, (created) => storedCompletion(request, 201, instanceView(created)));
        return reply.code(201).send(instanceView(record, viewer(request)));
      },
    );

    app.get(
      '/instances',
      {
        config: read,
        schema: {
          tags,
          operationId: 'listInstances',
          summary: 'List instances, newest first; `status` is a comma-separated list',
          querystring: Type.Object(
            {
              status: Type.Optional(Type.String({ maxLength: 200 })),
              limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
              after: Type.Optional(Type.String({ maxLength: 64 })),
            },
            { additionalProperties: false },
          ),
          response: responses({
            200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Type.Ref(Instance)), has_more: Type.Boolean(), next_cursor: Type.Union([Type.String(), Type.Null()]) }),
          }),
        },
      },
      async (request) => {
        const statuses = request.query.status?.split(',').map((s) => s.trim()).filter(Boolean) ?? [];
        const unknown = statuses.find((s) => !(INSTANCE_STATUSES as readonly string[]).includes(s));
        if (unknown) throw new ApiError('invalid_request', `unknown status "${unknown}"; statuses are: ${INSTANCE_STATUSES.join(', ')}`, { param: 'status' });
        const page = await store.list(request.principal!.org.id, {
          statuses: statuses as InstanceStatus[],
          limit: request.query.limit ?? 20,
          ...(request.query.after ? { after: request.query.after } : {}),
        });
        return {
          object: 'list' as const,
          data: page.data.map((r) => instanceView(r, viewer(request))),
          has_more: page.hasMore,
          next_cursor: page.hasMore ? page.data.at(-1)!.id : null,
        };
      },
    );

    app.get(
      '/instances/:id',
      { config: read, schema: { tags, operationId: 'getInstance', summary: 'Read one instance', params: IdParams, response: responses({ 200: Type.Ref(Instance) }) } },
      async (request) => {
        const record = await instances.get(request.principal!.org.id, request.params.id);
        const month = await sla.forInstance(record.id);
        return {
          ...instanceView(record, viewer(request)),
          ...(month
            ? {
                sla: {
                  period: month.period,
                  availability_percent: Math.round(month.availability * 1e6) / 1e4,
                  target_percent: month.target * 100,
                  met: month.met,
                  downtime_seconds: Math.round(month.downMs / 1000),
                },
              }
            : {}),
        };
      },
    );

    app.post(
      '/instances/:id/terminate',
      {
        config: write,
        schema: {
          tags,
          operationId: 'terminateInstance',
          summary: 'Terminate: SIGTERM, up to 60 s, then SIGKILL; force=true skips the grace. Safe to repeat.',
          params: IdParams,
          querystring: Type.Object({ force: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
          body: Type.Object({ force: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
          response: responses({ 200: Type.Ref(Instance) }),
        },
      },
      async (request) => {
        const force = request.body.force ?? request.query.force ?? false;
        return instanceView(await instances.terminate(request.principal!.org.id, request.params.id, force), viewer(request));
      },
    );

    app.post(
      '/instances/:id/extend',
      {
        config: { ...write, billable: true },
        schema: {
          tags,
          operationId: 'extendInstance',
          summary: 'Extend a reservation by `hours`, charged up front at its booked rate (total up to 720 h)',
          params: IdParams,
          body: Type.Object({ hours: Type.Integer({ minimum: 1, maximum: 720 }) }, { additionalProperties: false }),
          response: responses({ 200: Type.Ref(Instance) }),
        },
      },
      async (request) =>
        instanceView(
          // The answer commits with the extension's charge: a retry after a crash does not charge again.
          await instances.extend(request.principal!.org.id, request.params.id, request.body.hours, (updated) => storedCompletion(request, 200, instanceView(updated))),
          viewer(request),
        ),
    );
  };
}
