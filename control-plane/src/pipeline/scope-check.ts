// Step 5: the scope the route requires (route config `scope`).
import type { FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';

export async function checkScope(request: FastifyRequest): Promise<void> {
  const required = request.routeOptions.config.scope;
  if (required && !request.principal!.key.scopes.includes(required)) {
    throw new ApiError(
      'forbidden_scope',
      `this key lacks the ${required} scope required by ${request.method} ${request.routeOptions.url}`,
    );
  }
}
