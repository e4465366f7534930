// Prometheus metrics of the public listener (GET /metrics): the process, HTTP requests by
// route and status, and the service's own series (inference-metrics.ts, fleet-metrics.ts).
// Each app has its own registry so several apps (tests) do not collide. No series carries
// an organization, key, user or request label: the exposition is aggregate by design.
import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { InferenceMetrics } from './inference-metrics.js';
import { registerFleetMetrics, type FleetMetrics, type FleetSources } from './fleet-metrics.js';

/**
 * prom-client's default gauges that end in `_total` although they are not counters:
 * `promtool check metrics` rejects them, and the same values exist without the suffix
 * (nodejs_active_handles, nodejs_active_requests, nodejs_active_resources).
 */
const MISNAMED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export interface ServiceMetrics extends FleetMetrics {
  registry: Registry;
  inference: InferenceMetrics;
}

export function installMetrics(app: FastifyInstance, sources: FleetSources & { knownModels: ReadonlySet<string> }): ServiceMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({ name: 'svc_http_requests_total', help: 'HTTP requests by route and status', labelNames, registers: [registry] });
  const latency = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request latency by route and status',
    labelNames,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  app.addHook('onResponse', (request, reply, done) => {
    // The route pattern, never the URL: /v1/instances/:id, not one series per instance.
    const labels = { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) };
    requests.inc(labels);
    latency.observe(labels, reply.elapsedTime / 1000);
    done();
  });
  const inference = new InferenceMetrics(registry, sources.knownModels);
  inference.install(app);
  return { registry, inference, ...registerFleetMetrics(registry, sources) };
}
