// The OpenAPI document's frame: info and licence, servers, the tag list, and the
// touch-ups fastify-swagger leaves to us. Routes bring their own operationId, summary,
// tags and schemas; `redocly lint` (redocly.yaml) and control-plane/test/openapi-contract.test.ts
// hold every operation to that.
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';

/** Every tag an operation may carry, with what it groups; an undeclared tag fails the lint. */
export const API_TAGS = [
  { name: 'inference', description: 'OpenAI-compatible chat completions and embeddings, and their usage records.' },
  { name: 'models', description: 'The model catalog your organization may call.' },
  { name: 'instances', description: 'GPU instances: create, list, terminate, extend; SKUs and free capacity.' },
  { name: 'billing', description: 'Charges, usage rollups (JSON and CSV), credit balance and invoices of your organization.' },
  { name: 'keys', description: 'API keys of your organization (admin keys only).' },
  { name: 'organization', description: 'Your organization and its allowlists (admin keys only).' },
  { name: 'webhooks', description: 'Signed event deliveries to your HTTPS endpoints.' },
  { name: 'operations', description: 'Liveness, readiness, Prometheus metrics and this document; no API key.' },
  { name: 'status', description: 'Public, key-less service status per pool.' },
  { name: 'operator', description: 'The fleet, for operator keys only: nodes, GPUs, instances and replicas across organizations.' },
] as const;

/** What a success answer is, where a route's response schema has no description of its own. */
const STATUS_DESCRIPTIONS: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '202': 'Accepted',
  '204': 'No content',
};

export function openApiOptions(opts: { version: string; publicBaseUrl: string }): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Inference and GPU Compute Service API',
        version: opts.version,
        description: 'OpenAI-compatible inference, the model catalog, GPU instances and key administration.',
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
      },
      // A relative server ("/") means "where this document was fetched from", which is
      // right for every deployment that does not set SVC_PUBLIC_BASE_URL.
      servers: [{ url: opts.publicBaseUrl || '/', description: 'This control plane' }],
      tags: API_TAGS.map((t) => ({ ...t })),
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key' } } },
      security: [{ bearer: [] }],
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transformObject: (documentObject) => {
      const doc = (documentObject as { openapiObject: Record<string, unknown> }).openapiObject;
      describeDefaultResponses(doc);
      return doc;
    },
  };
}

/** fastify-swagger names every undescribed response "Default Response"; say what it is instead. */
function describeDefaultResponses(doc: Record<string, unknown>): void {
  const paths = (doc.paths ?? {}) as Record<string, Record<string, { responses?: Record<string, { description?: string }> }>>;
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        if (response.description === 'Default Response') response.description = STATUS_DESCRIPTIONS[status] ?? `HTTP ${status}`;
      }
    }
  }
}
