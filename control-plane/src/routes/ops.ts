// Operations endpoints outside /v1 and outside the API-key pipeline: liveness,
// readiness, Prometheus metrics and the OpenAPI document.
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { ApiError } from '@svc/shared';
import type { Store } from '../store/store.js';
import { MIGRATIONS } from '../store/sqlite/migrations.js';

export function opsRoutes(store: Store, metrics: Registry) {
  return async function register(app: FastifyInstance): Promise<void> {
    const hidden = { schema: { hide: true } };
    app.get('/healthz', hidden, async () => ({ status: 'ok' }));

    app.get('/readyz', hidden, async (_request) => {
      const expected = Math.max(...MIGRATIONS.map((m) => m.version));
      let version: number;
      try {
        version = await store.schemaVersion();
      } catch (err) {
        _request.log.warn({ err }, 'readiness: store unavailable');
        throw new ApiError('service_unavailable', 'the store does not answer');
      }
      if (version < expected) throw new ApiError('service_unavailable', `schema at version ${version}, expected ${expected}`);
      return { status: 'ready', schema_version: version };
    });

    app.get('/metrics', hidden, async (_request, reply) => {
      reply.type(metrics.contentType);
      return metrics.metrics();
    });

    app.get('/openapi.json', hidden, async () => app.swagger());
  };
}
