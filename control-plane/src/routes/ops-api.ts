// The operator API under /ops/v1: the fleet (nodes, GPUs, health timelines, enrollment
// tokens), instances, replicas, orgs, keys and webhooks across orgs, operator keys and
// the audit trail. Operator keys only (operators/operator-auth.ts); every route answers
// what FleetOperations answers, the same JSON svcctl prints with --json.
import { Type, type TSchema, type TString } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { DEFAULT_OVERLAP_SECONDS, MAX_OVERLAP_SECONDS } from '../keys/key-service.js';
import { SCOPES } from '../keys/scopes.js';
import { INSTANCE_STATUSES } from '../instances/lifecycle.js';
import { ListOf, StringEnum, responses } from '../http/schemas.js';
import { parseTtlSeconds } from '../nodes/node-credentials.js';
import { ApiError } from '@svc/shared';
import { FleetOperations, type FleetDeps } from '../operators/fleet-operations.js';
import { MAX_GPU_QUOTA } from '../orgs/org-service.js';
import { OPERATOR_SCOPES } from '../operators/operator-key.js';
import { OperatorKeyService } from '../operators/operator-key-service.js';
import { operatorAuth } from '../operators/operator-auth.js';
import { DEFAULT_SECRET_OVERLAP_SECONDS } from '../webhooks/webhook-service.js';

export const OPS_PREFIX = '/ops/v1';

/** Views are documented by their fields in docs/operators.md; the wire carries them unchanged. */
const View = (description: string) => Type.Object({}, { additionalProperties: true, description });
const Views = (description: string) => ListOf(View(description));

const Id = <K extends string>(name: K) =>
  Type.Object({ [name]: Type.String({ minLength: 1, maxLength: 200 }) } as Record<K, TString>, { additionalProperties: false });
const Limit = (fallback: number, max = 1000) => Type.Integer({ minimum: 1, maximum: max, default: fallback });
const Overlap = (fallback: number) => Type.Integer({ minimum: 0, maximum: MAX_OVERLAP_SECONDS, default: fallback });
const Strings = (max: number) => Type.Array(Type.String({ minLength: 0, maxLength: 300 }), { maxItems: max });
const Empty = Type.Object({}, { additionalProperties: false });

const read = { operatorScope: 'operator:read' as const };
const write = { operatorScope: 'operator:write' as const };
const tags = ['operator'];

/** A route's schema: its OpenAPI names, its request parts (params, querystring, body) and answers. */
function doc<P extends { params?: TSchema; querystring?: TSchema; body?: TSchema }>(operationId: string, summary: string, parts: P, ok: Record<number, TSchema>) {
  return { operationId, summary, tags, security: [{ bearer: [] }], ...parts, response: responses(ok) };
}

export function opsApiRoutes(deps: FleetDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    const keys = new OperatorKeyService(deps.store.operators, deps.clock);
    app.decorateRequest('operator', null);
    // No operator route without a declared scope or hidden from /openapi.json: the auth
    // matrix test walks the document, so every route must be in it.
    app.addHook('onRoute', (route) => {
      if (route.method === 'HEAD') return;
      if (!route.config?.operatorScope) throw new Error(`${String(route.method)} ${route.url} declares no operatorScope`);
      if ((route.schema as { hide?: boolean } | undefined)?.hide) throw new Error(`${String(route.method)} ${route.url} may not be hidden from the OpenAPI document`);
    });
    app.addHook('onRequest', operatorAuth(keys, deps.services.unknownKeys));
    const ops = (request: FastifyRequest) => new FleetOperations(deps, request.operator!.id);

    // Nodes, GPUs, health.
    app.get('/nodes', { config: read, schema: doc('listNodes', 'Every node: pool, status, healthy/total GPUs, utilization, last seen', {}, { 200: Views('node') }) }, async (r) =>
      ops(r).listNodes(),
    );
    app.get(
      '/nodes/:node',
      { config: read, schema: doc('getNode', 'One node (id or hostname): host facts, GPUs, recent health timeline, commands waiting', { params: Id('node'), querystring: Type.Object({ events: Limit(20) }, { additionalProperties: false }) }, { 200: View('node detail') }) },
      async (r) => ops(r).showNode(r.params.node, r.query.events),
    );
    app.get(
      '/nodes/:node/timeline',
      {
        config: read,
        schema: doc(
          'getNodeTimeline',
          'The health timeline of a node, newest first (XID, ECC, thermal, health verdicts); optionally of one GPU',
          { params: Id('node'), querystring: Type.Object({ limit: Limit(100), gpu: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) }, { additionalProperties: false }) },
          { 200: Views('health event') },
        ),
      },
      async (r) => ops(r).nodeTimeline(r.params.node, r.query.limit, r.query.gpu),
    );
    for (const action of ['cordon', 'uncordon', 'drain'] as const) {
      const summaries = {
        cordon: 'Place no new work on the node (running work stays)',
        uncordon: 'Let the scheduler use the node again (clears cordon and drain)',
        drain: 'Cordon the node and mark it draining',
      };
      app.post(
        `/nodes/:node/${action}`,
        { config: write, schema: doc(`${action}Node`, summaries[action], { params: Id('node'), body: Empty }, { 200: View('node state') }) },
        async (r) => ops(r).setNodeState(r.params.node, action),
      );
    }
    app.post(
      '/nodes/:node/forget',
      { config: write, schema: doc('forgetNode', 'Settle a node gone for good: its instances end as of its last contact; only after SVC_NODE_FORGET_AFTER_MS without contact', { params: Id('node'), body: Empty }, { 200: View('forgotten node') }) },
      async (r) => ops(r).forgetNode(r.params.node),
    );
    app.post(
      '/nodes/:node/gpu-health-reset',
      {
        config: write,
        schema: doc(
          'resetGpuHealth',
          "Queue a command that clears a GPU's unhealthy verdict (uuid, uuid prefix or index; every GPU when absent)",
          { params: Id('node'), body: Type.Object({ gpu: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) }, { additionalProperties: false }) },
          { 200: View('node command') },
        ),
      },
      async (r) => ops(r).resetGpuHealth(r.params.node, r.body.gpu),
    );
    app.get('/node-commands/:command_id', { config: read, schema: doc('getNodeCommand', 'A command sent to a node agent and its outcome', { params: Id('command_id') }, { 200: View('node command') }) }, async (r) =>
      ops(r).getCommand(r.params.command_id),
    );
    app.get(
      '/gpus',
      {
        config: read,
        schema: doc(
          'listGpus',
          'Every GPU of the fleet with its node, pool and health',
          { querystring: Type.Object({ pool: Type.Optional(Type.String({ maxLength: 20 })), unhealthy: Type.Optional(Type.Boolean()) }, { additionalProperties: false }) },
          { 200: Views('GPU') },
        ),
      },
      async (r) => ops(r).listGpus(r.query),
    );
    app.get(
      '/free-gpus',
      {
        config: read,
        schema: doc('listFreeGpus', 'Healthy free GPUs of a model per schedulable node (what the scheduler sees)', { querystring: Type.Object({ model: Type.String({ minLength: 1, maxLength: 200 }), pool: Type.Optional(Type.String({ maxLength: 20 })) }, { additionalProperties: false }) }, {
          200: Views('free GPUs of a node'),
        }),
      },
      async (r) => ops(r).freeGpus(r.query.model, r.query.pool),
    );

    // Enrollment tokens.
    app.get('/enrollment-tokens', { config: read, schema: doc('listEnrollmentTokens', 'Enrollment tokens and their state (values are never shown again)', {}, { 200: Views('enrollment token') }) }, async (r) => ops(r).listTokens());
    app.post(
      '/enrollment-tokens',
      {
        config: write,
        schema: doc(
          'createEnrollmentToken',
          'Make a one-time enrollment token; its value is shown once',
          { body: Type.Object({ pool: Type.Optional(StringEnum(['na', 'eu', 'apac'] as const)), ttl: Type.Optional(Type.String({ minLength: 1, maxLength: 20, description: '90s, 30m, 24h, 7d' })) }, { additionalProperties: false }) },
          { 201: View('enrollment token with its value') },
        ),
      },
      async (r, reply) => {
        let ttlSeconds: number | undefined;
        if (r.body.ttl !== undefined) {
          ttlSeconds = parseTtlSeconds(r.body.ttl);
          if (ttlSeconds === undefined) throw new ApiError('invalid_request', `ttl ${r.body.ttl} is not a duration; use e.g. 90s, 30m, 24h or 7d`, { param: 'ttl' });
        }
        return reply.code(201).send(await ops(r).createToken({ pool: r.body.pool, ttlSeconds }));
      },
    );
    app.post('/enrollment-tokens/:token_id/revoke', { config: write, schema: doc('revokeEnrollmentToken', 'Revoke an unused token (idempotent)', { params: Id('token_id'), body: Empty }, { 200: View('enrollment token') }) }, async (r) =>
      ops(r).revokeToken(r.params.token_id),
    );

    // Instances and replicas across orgs.
    app.get(
      '/instances',
      {
        config: read,
        schema: doc(
          'listAllInstances',
          'Instances of every org (or one), newest first per org',
          { querystring: Type.Object({ org: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })), status: Type.Optional(Type.Array(StringEnum(INSTANCE_STATUSES), { maxItems: INSTANCE_STATUSES.length })), limit: Limit(50, 500) }, { additionalProperties: false }) },
          { 200: Views('instance with its org_id') },
        ),
      },
      async (r) => ops(r).listInstances({ org: r.query.org, statuses: r.query.status, limit: r.query.limit }),
    );
    app.get('/instances/:instance_id', { config: read, schema: doc('getAnyInstance', 'One instance of any org, with its pull progress', { params: Id('instance_id') }, { 200: View('instance with its org_id') }) }, async (r) =>
      ops(r).showInstance(r.params.instance_id),
    );
    app.post(
      '/instances/:instance_id/terminate',
      { config: write, schema: doc('terminateAnyInstance', 'Terminate an instance of any org: SIGTERM, the grace, then SIGKILL; force skips the grace', { params: Id('instance_id'), body: Type.Object({ force: Type.Optional(Type.Boolean({ default: false })) }, { additionalProperties: false }) }, { 200: View('instance') }) },
      async (r) => ops(r).terminateInstance(r.params.instance_id, r.body.force ?? false),
    );
    app.get(
      '/replicas',
      { config: read, schema: doc('listReplicas', 'Model-server replicas with status, endpoint and restarts', { querystring: Type.Object({ all: Type.Boolean({ default: false }), limit: Limit(100) }, { additionalProperties: false }) }, { 200: Views('replica') }) },
      async (r) => ops(r).listReplicas({ all: r.query.all, limit: r.query.limit }),
    );

    // Billing accounts of orgs.
    const Usd = Type.String({ minLength: 1, maxLength: 24, pattern: '^[0-9]{1,9}(\\.[0-9]{1,9})?$', description: 'USD, e.g. 25 or 0.50' });
    app.get('/orgs/:org/billing', { config: read, schema: doc('getOrgBilling', "An organization's billing account: mode, balance, month to date, limits", { params: Id('org') }, { 200: View('billing account') }) }, async (r) =>
      ops(r).billingAccount(r.params.org),
    );
    app.post(
      '/orgs/:org/billing/credits',
      {
        config: write,
        schema: doc('grantOrgCredit', 'Grant credit to an organization (a ledger line of its own)', { params: Id('org'), body: Type.Object({ usd: Usd, note: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }, { additionalProperties: false }) }, { 201: View('billing account') }),
      },
      async (r, reply) => reply.code(201).send(await ops(r).grantCredit(r.params.org, r.body.usd, r.body.note ?? 'Credit grant')),
    );
    app.patch(
      '/orgs/:org/billing',
      {
        config: write,
        schema: doc(
          'updateOrgBilling',
          'Set prepaid or postpaid, the monthly credit limit and the low-balance threshold (null clears one)',
          {
            params: Id('org'),
            body: Type.Object(
              {
                mode: Type.Optional(StringEnum(['prepaid', 'postpaid'] as const)),
                credit_limit: Type.Optional(Type.Union([Usd, Type.Null()])),
                low_balance: Type.Optional(Type.Union([Usd, Type.Null()])),
              },
              { additionalProperties: false, minProperties: 1 },
            ),
          },
          { 200: View('billing account') },
        ),
      },
      async (r) => ops(r).configureBilling(r.params.org, r.body),
    );

    // Incidents.
    app.get('/why/:ref', { config: read, schema: doc('getIncidentReport', 'svcctl why: a node, GPU UUID or instance with its health, XID timeline, workloads, orgs and remediation', { params: Id('ref') }, { 200: View('incident report') }) }, async (r) =>
      ops(r).why(r.params.ref),
    );

    // Orgs.
    app.get('/orgs', { config: read, schema: doc('listOrgs', 'Every organization', {}, { 200: Views('org') }) }, async (r) => ops(r).listOrgs());
    app.get('/orgs/:org', { config: read, schema: doc('getOrg', 'One organization by id or name', { params: Id('org') }, { 200: View('org') }) }, async (r) => ops(r).showOrg(r.params.org));
    app.post(
      '/orgs',
      { config: write, schema: doc('createOrg', 'Create an organization', { body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 100 }), tier: Type.Optional(Type.Integer({ minimum: 2, maximum: 3, default: 2 })) }, { additionalProperties: false }) }, { 201: View('org') }) },
      async (r, reply) => reply.code(201).send(await ops(r).createOrg(r.body.name, r.body.tier ?? 2)),
    );
    app.patch(
      '/orgs/:org',
      {
        config: write,
        schema: doc(
          'updateOrg',
          'Change tier, IP allowlist, referrer allowlist, callable models (null: all) or GPU quota (null: the default)',
          {
            params: Id('org'),
            body: Type.Object(
              {
                tier: Type.Optional(Type.Integer({ minimum: 2, maximum: 3 })),
                ip_allowlist: Type.Optional(Strings(1000)),
                referrer_allowlist: Type.Optional(Strings(1000)),
                allowed_models: Type.Optional(Type.Union([Strings(1000), Type.Null()])),
                gpu_quota: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: MAX_GPU_QUOTA }), Type.Null()])),
              },
              { additionalProperties: false },
            ),
          },
          { 200: View('org') },
        ),
      },
      async (r) => ops(r).updateOrg(r.params.org, r.body),
    );

    // Customer keys across orgs.
    app.get(
      '/keys',
      { config: read, schema: doc('listAllKeys', 'Customer API keys of every org (or one): prefix and last 4 only', { querystring: Type.Object({ org: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }, { additionalProperties: false }) }, { 200: Views('API key') }) },
      async (r) => ops(r).listKeys(r.query.org),
    );
    app.post(
      '/keys',
      {
        config: write,
        schema: doc(
          'createOrgKey',
          "Create a customer API key in an org (the default org when absent); the value is shown once",
          {
            body: Type.Object(
              {
                org: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
                kind: Type.Optional(StringEnum(['live', 'test', 'public'] as const, { default: 'live' })),
                scopes: Type.Optional(Type.Array(StringEnum(SCOPES), { minItems: 1, maxItems: SCOPES.length })),
                admin: Type.Optional(Type.Boolean({ default: false })),
                name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
              },
              { additionalProperties: false },
            ),
          },
          { 201: View('API key with its value') },
        ),
      },
      async (r, reply) => reply.code(201).send(await ops(r).createKey(r.body)),
    );
    app.post(
      '/keys/:key_id/rotate',
      { config: write, schema: doc('rotateOrgKey', 'Issue a new value for a customer key; the old one works for the overlap', { params: Id('key_id'), body: Type.Object({ overlap_seconds: Type.Optional(Overlap(DEFAULT_OVERLAP_SECONDS)) }, { additionalProperties: false }) }, { 200: View('API key with its value') }) },
      async (r) => ops(r).rotateKey(r.params.key_id, r.body.overlap_seconds ?? DEFAULT_OVERLAP_SECONDS),
    );
    app.post('/keys/:key_id/revoke', { config: write, schema: doc('revokeOrgKey', 'Revoke a customer key at once (idempotent)', { params: Id('key_id'), body: Empty }, { 200: View('revocation') }) }, async (r) =>
      ops(r).revokeKey(r.params.key_id),
    );

    // Webhooks across orgs.
    app.get(
      '/webhooks',
      { config: read, schema: doc('listAllWebhooks', 'Webhooks of every org (or one), without secrets', { querystring: Type.Object({ org: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }, { additionalProperties: false }) }, { 200: Views('webhook') }) },
      async (r) => ops(r).listWebhooks(r.query.org),
    );
    app.get('/webhooks/:webhook_id', { config: read, schema: doc('getAnyWebhook', 'One webhook of any org', { params: Id('webhook_id') }, { 200: View('webhook') }) }, async (r) => ops(r).showWebhook(r.params.webhook_id));
    app.post(
      '/webhooks',
      {
        config: write,
        schema: doc(
          'createOrgWebhook',
          'Subscribe a URL of an org to events; the signing secret is shown once',
          {
            body: Type.Object(
              {
                org: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
                url: Type.String({ minLength: 1, maxLength: 2048 }),
                event_types: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { minItems: 1, maxItems: 50 }),
                description: Type.Optional(Type.String({ maxLength: 500 })),
              },
              { additionalProperties: false },
            ),
          },
          { 201: View('webhook with its secret') },
        ),
      },
      async (r, reply) => reply.code(201).send(await ops(r).createWebhook({ org: r.body.org, url: r.body.url, eventTypes: r.body.event_types, description: r.body.description })),
    );
    app.delete('/webhooks/:webhook_id', { config: write, schema: doc('deleteAnyWebhook', 'Delete a webhook and drop its pending deliveries', { params: Id('webhook_id') }, { 200: View('deletion') }) }, async (r) =>
      ops(r).deleteWebhook(r.params.webhook_id),
    );
    app.post(
      '/webhooks/:webhook_id/rotate-secret',
      { config: write, schema: doc('rotateAnyWebhookSecret', 'Issue a new signing secret; both sign during the overlap', { params: Id('webhook_id'), body: Type.Object({ overlap_seconds: Type.Optional(Overlap(DEFAULT_SECRET_OVERLAP_SECONDS)) }, { additionalProperties: false }) }, { 200: View('webhook with its secret') }) },
      async (r) => ops(r).rotateWebhookSecret(r.params.webhook_id, r.body.overlap_seconds ?? DEFAULT_SECRET_OVERLAP_SECONDS),
    );
    app.get(
      '/webhooks/:webhook_id/deliveries',
      { config: read, schema: doc('listAnyWebhookDeliveries', 'Recent deliveries and their attempts, newest first', { params: Id('webhook_id'), querystring: Type.Object({ limit: Limit(20, 100) }, { additionalProperties: false }) }, { 200: Views('delivery') }) },
      async (r) => ops(r).listDeliveries(r.params.webhook_id, r.query.limit),
    );
    app.post(
      '/webhooks/:webhook_id/deliveries/:delivery_id/redeliver',
      {
        config: write,
        schema: doc('redeliverAnyWebhook', 'Send a delivery again (same webhook-id)', { params: Type.Object({ webhook_id: Type.String({ minLength: 1, maxLength: 200 }), delivery_id: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }), body: Empty }, { 200: View('delivery') }),
      },
      async (r) => ops(r).redeliver(r.params.webhook_id, r.params.delivery_id),
    );

    // Operator keys and the audit trail.
    app.get('/operator-keys', { config: read, schema: doc('listOperatorKeys', 'Operator keys (last 4 characters only)', {}, { 200: Views('operator key') }) }, async (r) => ops(r).listOperatorKeys());
    app.post(
      '/operator-keys',
      {
        config: write,
        schema: doc(
          'createOperatorKey',
          'Create an operator key; its value is shown once',
          { body: Type.Object({ scopes: Type.Array(StringEnum(OPERATOR_SCOPES), { minItems: 1, maxItems: 2 }), name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) }, { additionalProperties: false }) },
          { 201: View('operator key with its value') },
        ),
      },
      async (r, reply) => reply.code(201).send(await ops(r).createOperatorKey(r.body)),
    );
    app.post('/operator-keys/:operator_key_id/revoke', { config: write, schema: doc('revokeOperatorKey', 'Revoke an operator key at once (idempotent)', { params: Id('operator_key_id'), body: Empty }, { 200: View('operator key') }) }, async (r) =>
      ops(r).revokeOperatorKey(r.params.operator_key_id),
    );
    app.get('/audit', { config: read, schema: doc('listOperatorAudit', 'What operators changed, newest first, each naming the operator key', { querystring: Type.Object({ limit: Limit(50) }, { additionalProperties: false }) }, { 200: Views('audit entry') }) }, async (r) =>
      ops(r).listAudit(r.query.limit),
    );
  };
}
