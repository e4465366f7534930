// Who may call /ops/v1: an operator key (svcop_) holding the route's operator scope.
// Customer API keys are refused with 403 whether or not they are valid, without a store
// lookup, so the operator API is no oracle for customer keys.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';
import { bearerKey } from '../pipeline/authenticate.js';
import type { OperatorKeyRecord, OperatorScope } from '../store/operator-store.js';
import { grants } from './operator-key.js';
import type { OperatorKeyService } from './operator-key-service.js';
import type { UnknownKeyGuard } from '../pipeline/unknown-key-guard.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified operator key; set on every /ops/v1 route. */
    operator: OperatorKeyRecord | null;
  }
  interface FastifyContextConfig {
    /** The operator scope an /ops/v1 route requires (operator:write includes operator:read). */
    operatorScope?: OperatorScope;
  }
}

const CUSTOMER_KEY = /^svc_(sk|pk)_/;

export const CUSTOMER_KEY_REFUSAL = 'customer API keys cannot call the operator API; use an operator key (svcop_…)';

/** `unknownKeys`: the same per-address cap on lookups of unknown keys as the customer API's. */
export function operatorAuth(keys: OperatorKeyService, unknownKeys: UnknownKeyGuard) {
  return async function authenticateOperator(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const value = bearerKey(request);
    if (CUSTOMER_KEY.test(value)) throw new ApiError('forbidden_scope', CUSTOMER_KEY_REFUSAL);
    const verification = await keys.verify(value, (known) => {
      if (!known) unknownKeys.check(request.ip);
    });
    if (!verification.ok) {
      if (verification.unknown) unknownKeys.unknown(request.ip);
      throw new ApiError('unauthorized', verification.reason);
    }
    const required = request.routeOptions.config.operatorScope;
    // A route without a declared scope is a programming error: refuse rather than open it.
    if (!required || !grants(verification.key.scopes, required)) {
      throw new ApiError('forbidden_scope', `this operator key lacks the ${required ?? 'operator:write'} scope required by ${request.method} ${request.routeOptions.url}`);
    }
    request.operator = verification.key;
  };
}
