// Operations endpoints outside /v1 and outside the API-key pipeline: liveness,
// readiness, Prometheus metrics and the OpenAPI document. They are in the document too
// (tag "operations", no security), so load balancers and scrapers are configured from it.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiError } from '@svc/shared';
import type { Store } from '../store/store.js';
import { MIGRATIONS } from '../store/sqlite/migrations.js';
import { ErrorEnvelope, responses } from '../http/schemas.js';

const tags = ['operations'];
/** No API key: these answer anyone who reaches the listener. */
const security: Array<Record<string, string[]>> = [];
const Unavailable = Type.Ref(ErrorEnvelope, { description: 'The store does not answer, or its schema is behind this release.' });

/** What GET /metrics serves: this process's registry, or (workers) every worker's, merged. */
export interface MetricsExposition {
  contentType: string;
  text(): Promise<string>;
}

export function opsRoutes(store: Store, metrics: MetricsExposition): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      '/healthz',
      {
        schema: {
          tags,
          security,
          operationId: 'getLiveness',
          summary: 'Liveness: the process answers HTTP',
          response: responses({ 200: Type.Object({ status: Type.Literal('ok') }, { description: 'The process is alive.' }) }),
        },
      },
      async () => ({ status: 'ok' as const }),
    );

    app.get(
      '/readyz',
      {
        schema: {
          tags,
          security,
          operationId: 'getReadiness',
          summary: 'Readiness: the store answers and its schema is current',
          response: responses({
            200: Type.Object({ status: Type.Literal('ready'), schema_version: Type.Integer() }, { description: 'Ready to serve.' }),
            503: Unavailable,
          }),
        },
      },
      async (request) => {
        const expected = Math.max(...MIGRATIONS.map((m) => m.version));
        let version: number;
        try {
          version = await store.schemaVersion();
        } catch (err) {
          request.log.warn({ err }, 'readiness: store unavailable');
          throw new ApiError('service_unavailable', 'the store does not answer');
        }
        if (version < expected) throw new ApiError('service_unavailable', `schema at version ${version}, expected ${expected}`);
        return { status: 'ready' as const, schema_version: version };
      },
    );

    app.get(
      '/metrics',
      {
        schema: {
          tags,
          security,
          operationId: 'getMetrics',
          summary: "The service's Prometheus metrics (aggregates only: no per-organization or per-key series)",
          response: {
            ...responses({}),
            200: {
              description: 'Prometheus text exposition format 0.0.4.',
              content: { 'text/plain': { schema: Type.String() } },
            },
          },
        },
      },
      async (request, reply) => {
        let text: string;
        try {
          text = await metrics.text();
        } catch (err) {
          request.log.warn({ err }, 'metrics: the workers could not be merged');
          throw new ApiError('service_unavailable', 'the metrics of every worker could not be gathered just now; scrape again');
        }
        reply.type(metrics.contentType);
        return text;
      },
    );

    app.get(
      '/openapi.json',
      {
        schema: {
          tags,
          security,
          operationId: 'getOpenApiDocument',
          summary: 'This OpenAPI 3.0 document',
          response: responses({ 200: Type.Object({}, { additionalProperties: true, description: 'The OpenAPI document of this API.' }) }),
        },
      },
      async () => app.swagger(),
    );
  };
}
