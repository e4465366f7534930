// Cross-origin access: browsers may call the API from any origin (keys, not cookies,
// authenticate). Only a real preflight (Origin and Access-Control-Request-Method) is
// answered by CORS; any other OPTIONS falls through to the router, so it gets the
// envelope (405 with Allow, or 404) instead of @fastify/cors's text/plain 400.
// @fastify/cors answers the preflights; every other request gets its three headers from
// one hook of precomputed values, since the plugin's per-request options (normalized and
// joined again on every request) cost a busy route a measurable share of its CPU.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import cors, { type FastifyCorsOptions } from '@fastify/cors';

const CORS_OPTIONS: FastifyCorsOptions = {
  origin: true,
  methods: ['GET', 'POST', 'PATCH', 'DELETE'],
  // No list: the headers a preflight asks for are allowed (@fastify/cors reflects them).
  // Keys, not cookies, authenticate, so a header lets a page do nothing it could not do
  // without it; a list had refused the official SDK's X-Stainless-* headers, which it sends
  // on every request, so a browser blocked every call it made.
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

const EXPOSED = (CORS_OPTIONS.exposedHeaders as string[]).join(', ');

export async function installCors(app: FastifyInstance): Promise<void> {
  // Encapsulated: the plugin's hook then runs for its own OPTIONS * route only.
  await app.register(async (preflights) => {
    await preflights.register(cors, () => (request: FastifyRequest, callback: (error: Error | null, options: FastifyCorsOptions) => void) =>
      callback(null, isPreflight(request) ? CORS_OPTIONS : NO_CORS),
    );
  });
  // An actual request: Vary for caches always; for a cross-origin one (a browser sends
  // Origin, a server-side client does not), the origin reflected and the headers it may
  // read. The plugin with `origin: true` would list those on every response.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method === 'OPTIONS') return done();
    reply.header('vary', 'Origin');
    const origin = request.headers.origin;
    if (origin) {
      reply.header('access-control-allow-origin', origin);
      reply.header('access-control-expose-headers', EXPOSED);
    }
    done();
  });
}
