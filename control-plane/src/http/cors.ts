// Cross-origin access: browsers may call the API from any origin (keys, not cookies,
// authenticate). Only a real preflight (Origin and Access-Control-Request-Method) is
// answered by CORS; any other OPTIONS falls through to the router, so it gets the
// envelope (405 with Allow, or 404) instead of @fastify/cors's text/plain 400.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import cors, { type FastifyCorsOptions } from '@fastify/cors';

const CORS_OPTIONS: FastifyCorsOptions = {
  origin: true,
  methods: ['GET', 'POST', 'PATCH', 'DELETE'],
  allowedHeaders: ['Authorization', 'Content-Type', 'X-Service-Pool', 'X-Service-Idempotency-Key', 'X-Request-Id'],
  exposedHeaders: [
    'x-request-id',
    'x-ratelimit-limit-requests',
    'x-ratelimit-remaining-requests',
    'x-ratelimit-reset-requests',
    'x-ratelimit-limit-tokens',
    'x-ratelimit-remaining-tokens',
    'x-ratelimit-reset-tokens',
    'retry-after',
    'retry-after-ms',
    'x-service-idempotent-replay',
  ],
  maxAge: 600,
};
const NO_CORS: FastifyCorsOptions = { ...CORS_OPTIONS, origin: false };

export function isPreflight(request: Pick<FastifyRequest, 'method' | 'headers'>): boolean {
  return request.method === 'OPTIONS' && !!request.headers.origin && !!request.headers['access-control-request-method'];
}

export async function installCors(app: FastifyInstance): Promise<void> {
  await app.register(cors, () => (request: FastifyRequest, callback: (error: Error | null, options: FastifyCorsOptions) => void) =>
    callback(null, request.method !== 'OPTIONS' || isPreflight(request) ? CORS_OPTIONS : NO_CORS),
  );
}
