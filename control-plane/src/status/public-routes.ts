// The public, key-less status pages on the public listener: GET /status (every pool),
// GET /status/{pool} (one pool's models and capacity) and their JSON twin GET /status.json.
// Outside /v1 and its key pipeline. Every request is served from one cached read of the
// fleet (snapshot-cache.ts), and the HTML of each snapshot is rendered once, so request
// rate does not turn into store or CPU load.
import { readFileSync } from 'node:fs';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiError, type Clock } from '@svc/shared';
import { POOLS } from '../models/catalog.js';
import type { DesiredReplica } from '../replicas/desired.js';
import { ErrorEnvelope, responses, StringEnum } from '../http/schemas.js';
import { readFleet, type FleetSource } from './fleet-read.js';
import { publicIndexPage, publicPoolPage } from './public-page.js';
import { publicStatus, type PublicStatus } from './public-status.js';
import { snapshotCache } from './snapshot-cache.js';

const Status = StringEnum(['up', 'degraded', 'down'] as const);

export const PublicStatusSchema = Type.Object(
  {
    status: Status,
    generated_at: Type.String({ format: 'date-time' }),
    pools: Type.Array(
      Type.Object({
        pool: Type.String(),
        status: Status,
        notes: Type.Array(Type.String(), { description: 'Why the pool is not up, in general words.' }),
        models: Type.Array(
          Type.Object({ model: Type.String(), status: Status, replicas_ready: Type.Integer(), replicas_desired: Type.Integer() }),
        ),
        capacity: Type.Array(
          Type.Object({
            sku: Type.String(),
            gpu_model: Type.String(),
            availability: StringEnum(['none', 'limited', 'available'] as const, { description: 'Free GPUs now: none, fewer than 8, or 8 or more.' }),
          }),
        ),
      }),
    ),
  },
  { $id: 'PublicStatus', description: 'Service status per pool: nothing about individual nodes, addresses or customers.' },
);

const Html = Type.String({ description: 'An HTML page.' });
const envelope = { description: 'Every non-2xx response.', content: { 'application/json': { schema: Type.Ref(ErrorEnvelope) } } };
/** An HTML page, or the error envelope in JSON. */
const htmlResponses = { 200: { description: 'An HTML page.', content: { 'text/html': { schema: Html } } }, '4xx': envelope, '5xx': envelope };
const PUBLIC_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
};
const CSS = readFileSync(new URL('./assets/status.css', import.meta.url), 'utf8');

export interface PublicStatusDeps {
  fleet: FleetSource;
  desired: readonly DesiredReplica[];
  skus: ReadonlyArray<{ id: string; gpu_model: string }>;
  cacheMs: number;
  clock: Clock;
}

export function publicStatusRoutes(deps: PublicStatusDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    const cache = snapshotCache(async () => publicStatus(await readFleet(deps.fleet, deps.desired, deps.clock.now()), deps.skus), deps.cacheMs, deps.clock);
    // A store that does not answer is a 503 a monitor understands, never a 500.
    const current = async (log: { warn(o: object, m: string): void }): Promise<PublicStatus> => {
      try {
        return await cache.get();
      } catch (err) {
        log.warn({ err }, 'status page: could not read the fleet');
        throw new ApiError('service_unavailable', 'the service status cannot be read right now; retry shortly');
      }
    };
    // Rendered pages of the current snapshot, by path; a new snapshot starts a new map.
    const rendered = new WeakMap<PublicStatus, Map<string, string>>();
    const renderOnce = (status: PublicStatus, key: string, render: () => string): string => {
      let pages = rendered.get(status);
      if (!pages) rendered.set(status, (pages = new Map()));
      let page = pages.get(key);
      if (page === undefined) pages.set(key, (page = render()));
      return page;
    };
    const refreshSeconds = Math.max(10, Math.ceil(deps.cacheMs / 1000));
    const cacheControl = `public, max-age=${Math.max(1, Math.floor(deps.cacheMs / 1000))}`;
    app.addSchema(PublicStatusSchema);

    app.get(
      '/status.json',
      {
        schema: {
          operationId: 'getServiceStatus',
          summary: 'Service status per pool (no key needed)',
          description: 'API status, models with replicas ready against desired, and coarse GPU capacity per SKU, for each pool. Cached briefly.',
          tags: ['status'],
          security: [],
          response: responses({ 200: Type.Ref(PublicStatusSchema) }),
        },
      },
      async (request, reply) => {
        const status = await current(request.log);
        reply.header('cache-control', cacheControl);
        return status;
      },
    );

    app.get(
      '/status',
      { schema: { operationId: 'getStatusPage', summary: 'Status page of every pool (HTML, no key needed)', tags: ['status'], security: [], response: htmlResponses } },
      async (request, reply) => {
        const status = await current(request.log);
        reply.headers({ ...PUBLIC_HEADERS, 'cache-control': cacheControl }).type('text/html; charset=utf-8');
        return renderOnce(status, '', () => publicIndexPage(status, refreshSeconds).text);
      },
    );

    app.get('/status/status.css', { schema: { hide: true } }, async (_request, reply) => {
      reply.headers({ 'x-content-type-options': 'nosniff', 'cache-control': 'public, max-age=300' }).type('text/css; charset=utf-8');
      return CSS;
    });

    app.get(
      '/status/:pool',
      {
        schema: {
          operationId: 'getPoolStatusPage',
          summary: "One pool's status page: models and GPU capacity (HTML, no key needed)",
          tags: ['status'],
          security: [],
          params: Type.Object({ pool: StringEnum(POOLS, { description: 'The pool (region).' }) }),
          response: htmlResponses,
        },
      },
      async (request, reply) => {
        const { pool } = request.params;
        const status = await current(request.log);
        reply.headers({ ...PUBLIC_HEADERS, 'cache-control': cacheControl }).type('text/html; charset=utf-8');
        return renderOnce(status, pool, () => publicPoolPage(status, status.pools.find((p) => p.pool === pool), pool, refreshSeconds).text);
      },
    );
  };
}
