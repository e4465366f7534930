// The request pipeline of every /v1 route, in the order the API promises: request id
// (a global hook), auth, IP allowlist, public-key rules, scope, rate limit; then, after
// schema validation, idempotency on POST routes. Each step is its own module; this one
// runs them in order as one callback hook per route, built when the route is added, so
// the route's scope is captured once and a request whose key is cached runs the whole
// chain synchronously (the pipeline's cost is benchmarked: npm run bench).
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import type { KeyVerifier, Verification } from '../keys/key-verifier.js';
import { authenticate, bearerKey } from './authenticate.js';
import type { Idempotency } from './idempotency.js';
import { checkIpAllowlist } from './ip-allowlist.js';
import { checkPublicKeyRules } from './public-key-rules.js';
import { rateLimit, type RateLimiter } from './rate-limit.js';
import { checkScope } from './scope-check.js';

export interface PipelineDeps {
  verifier: KeyVerifier;
  rateLimiter: RateLimiter;
  idempotency: Idempotency;
}

type Hook = RouteOptions['onRequest'];

function append<T>(existing: T | T[] | undefined, hook: T): T[] {
  return [...(existing === undefined ? [] : Array.isArray(existing) ? existing : [existing]), hook];
}

export function installPipeline(v1: FastifyInstance, deps: PipelineDeps): void {
  const applyRateLimit = rateLimit(deps.rateLimiter);

  v1.addHook('onRoute', (route) => {
    const scope = route.config?.scope;
    const allowsPublicKeys = route.config?.publicKey === true;
    const url = route.url;

    const afterAuth = (request: FastifyRequest, reply: FastifyReply, verification: Verification): void => {
      authenticate(request, verification);
      checkIpAllowlist(request);
      checkPublicKeyRules(request, allowsPublicKeys);
      checkScope(request, scope, url);
      applyRateLimit(request, reply);
    };

    const keyPipeline = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      let key: string;
      try {
        key = bearerKey(request);
        const cached = deps.verifier.verifyCached(key);
        if (cached) {
          afterAuth(request, reply, cached);
          return done();
        }
      } catch (err) {
        return done(err as Error);
      }
      deps.verifier.verify(key).then((verification) => {
        try {
          afterAuth(request, reply, verification);
        } catch (err) {
          return done(err as Error);
        }
        done();
      }, done);
    };
    route.onRequest = append(route.onRequest, keyPipeline) as Hook;

    // Idempotency applies to POST only; other routes do not pay for its hooks.
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.includes('POST')) {
      route.preHandler = append(route.preHandler, deps.idempotency.claim) as RouteOptions['preHandler'];
      route.onSend = append(route.onSend, deps.idempotency.record) as RouteOptions['onSend'];
      route.onResponse = append(route.onResponse, deps.idempotency.releaseAbandoned) as RouteOptions['onResponse'];
    }
  });
}
