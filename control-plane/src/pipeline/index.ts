// The request pipeline of every /v1 route, in the order the API promises: request id
// (a global hook), auth, IP allowlist, public-key rules, scope, rate limit; then, after
// schema validation, on POST routes the replay of an answer stored for the request's
// idempotency key, the balance check on billable routes, and the claim of the key.
// A replay comes before the balance check (the retry of a create that spent the last of
// the balance gets its instance, not 402) and after the rate limit (a replay is a request:
// it is read and sent, and an unlimited stream of them would be free load).
// Routes that spend model tokens take their rate limit later, once the body is parsed
// (preValidation): the request slot and the token estimate together, one statement on
// PostgreSQL (token-limit.ts's Admission), after the balance check (an org that may not
// spend takes no tokens); what that step refuses other than the request slot is answered
// after validation, where it was before. Each step is its own module; this one runs them
// in order as one callback hook per route, built when the route is added, so the route's
// scope is captured once and a request whose key is cached runs the whole chain
// synchronously (the pipeline's cost is benchmarked: npm run bench).
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import type { KeyVerifier, Verification } from '../keys/key-verifier.js';
import { authenticate, bearerKey } from './authenticate.js';
import type { Idempotency } from './idempotency.js';
import { checkIpAllowlist } from './ip-allowlist.js';
import { checkPublicKeyRules } from './public-key-rules.js';
import { rateLimit, type RateLimiter } from './rate-limit.js';
import { checkScope } from './scope-check.js';
import { Admission, type TokenLimiter } from './token-limit.js';
import type { UnknownKeyGuard } from './unknown-key-guard.js';
import type { BalanceGuard } from '../billing/spending.js';

export interface PipelineDeps {
  verifier: KeyVerifier;
  rateLimiter: RateLimiter;
  tokenLimiter: TokenLimiter;
  balanceGuard: BalanceGuard;
  idempotency: Idempotency;
  unknownKeys: UnknownKeyGuard;
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
    const spends = route.config?.tokenLimit;
    const billable = route.config?.billable === true;

    // An org that may not spend is refused before anything is taken from its token limit.
    const checkBalance = (request: FastifyRequest): Promise<void> | undefined => {
      const principal = request.principal!;
      return principal.key.kind === 'test' ? undefined : deps.balanceGuard.check(principal.org.id);
    };
    const admission = spends ? new Admission(deps.rateLimiter, deps.tokenLimiter, spends, billable ? checkBalance : undefined) : undefined;

    // A promise only when the limits are shared by several processes (one store statement).
    const afterAuth = (request: FastifyRequest, reply: FastifyReply, verification: Verification): void | Promise<void> => {
      authenticate(request, verification);
      checkIpAllowlist(request);
      checkPublicKeyRules(request, allowsPublicKeys);
      checkScope(request, scope, url);
      if (admission) return admission.keyChecked(request);
      return applyRateLimit(request, reply);
    };
    const finish = (pending: void | Promise<void>, done: HookHandlerDoneFunction): void => {
      if (pending) pending.then(() => done(), done);
      else done();
    };

    const keyPipeline = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      let key: string;
      try {
        key = bearerKey(request);
        const cached = deps.verifier.verifyCached(key);
        if (cached) return finish(afterAuth(request, reply, cached), done);
      } catch (err) {
        return done(err as Error);
      }
      // A key never verified here must fit the address's unknown-key allowance before the store is asked.
      const guard = (known: boolean): void => {
        if (!known) deps.unknownKeys.check(request.ip);
      };
      deps.verifier.verify(key, guard).then((verification) => {
        if (!verification.ok && verification.unknown) deps.unknownKeys.unknown(request.ip);
        let pending: void | Promise<void>;
        try {
          pending = afterAuth(request, reply, verification);
        } catch (err) {
          return done(err as Error);
        }
        finish(pending, done);
      }, done);
    };
    route.onRequest = append(route.onRequest, keyPipeline) as Hook;

    // Idempotency applies to POST only; other routes do not pay for its hooks.
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const posts = methods.includes('POST');
    if (posts) route.preHandler = append(route.preHandler, deps.idempotency.replayStored) as RouteOptions['preHandler'];

    if (admission) {
      // The request slot and the token estimate, once the body is parsed: a refused
      // request slot is answered at once, the tokens' verdict (and the balance's) after
      // validation and a replay (a replay spends no tokens: its estimate comes back when it
      // is sent), before the claim (a refused request claims nothing). A body that
      // never reaches preValidation (not JSON) spends its slot in onError. An admitted
      // request that ends without usage (refused later, failed upstream) gets its estimate
      // back when the response is done; usage recorded settles it sooner.
      route.preValidation = append(route.preValidation, admission.preValidation) as RouteOptions['preValidation'];
      route.preHandler = append(route.preHandler, admission.preHandler) as RouteOptions['preHandler'];
      route.onError = append(route.onError, admission.onError) as RouteOptions['onError'];
      const release = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
        if (request.principal) deps.tokenLimiter.release(request.principal.key.id, request.id);
        done();
      };
      route.onResponse = append(route.onResponse, release) as RouteOptions['onResponse'];
    } else if (billable) {
      // After the request limit, like every refusal of a keyed request.
      const balance = async (request: FastifyRequest): Promise<void> => checkBalance(request);
      route.preHandler = append(route.preHandler, balance) as RouteOptions['preHandler'];
    }

    if (posts) {
      route.preHandler = append(route.preHandler, deps.idempotency.claim) as RouteOptions['preHandler'];
      route.onSend = append(route.onSend, deps.idempotency.record) as RouteOptions['onSend'];
      route.onResponse = append(route.onResponse, deps.idempotency.releaseAbandoned) as RouteOptions['onResponse'];
    }
  });
}
