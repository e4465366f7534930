// What the request pipeline adds to fastify's request and route options.
import type { Scope } from '../keys/scopes.js';
import type { Principal } from '../keys/key-verifier.js';
import type { TokenLimitedRoute } from './token-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified key and its org; set by the auth step on every /v1 route. */
    principal: Principal | null;
    /** Set by the idempotency step while this request owns an idempotency key. */
    idempotencyClaim: { keyId: string; idemKey: string; claim: string } | null;
    /** Characters of the JSON body as received (0 without one). */
    bodyChars: number;
  }
  interface FastifyContextConfig {
    /** The scope the route requires; absent means any valid key. */
    scope?: Scope;
    /** Public (browser) keys may call the route. */
    publicKey?: boolean;
    /** Top-level answer fields that hold a secret shown once: never stored for an idempotent replay. */
    secretFields?: readonly string[];
    /** The route spends model tokens: admitted against the key's tokens-per-minute limit. */
    tokenLimit?: TokenLimitedRoute;
    /** The route starts billable work: refused (402) for orgs that may not spend; sandbox keys are never billed. */
    billable?: boolean;
  }
}

export {};
