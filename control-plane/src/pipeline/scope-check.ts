// Step 5: the scope the route requires (route config `scope`).
import type { FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';
import type { Scope } from '../keys/scopes.js';

export function checkScope(request: FastifyRequest, required: Scope | undefined, routeUrl: string): void {
  if (required && !request.principal!.key.scopes.includes(required)) {
    throw new ApiError('forbidden_scope', `this key lacks the ${required} scope required by ${request.method} ${routeUrl}`);
  }
}
