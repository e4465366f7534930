// Step 5: the scope the route requires (route config `scope`).
import type { FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';
import { SANDBOX_REFUSAL, SANDBOX_REFUSED_SCOPES, type Scope } from '../keys/scopes.js';

export function checkScope(request: FastifyRequest, required: Scope | undefined, routeUrl: string): void {
  // Also for test keys that were given compute:write before that was refused at creation.
  if (required && SANDBOX_REFUSED_SCOPES.has(required) && request.principal!.key.kind === 'test') {
    throw new ApiError('forbidden_scope', `${SANDBOX_REFUSAL} (${request.method} ${routeUrl})`);
  }
  if (required && !request.principal!.key.scopes.includes(required)) {
    throw new ApiError('forbidden_scope', `this key lacks the ${required} scope required by ${request.method} ${routeUrl}`);
  }
}
