// Step 3: the org's CIDR allowlist. It binds secret keys (live and test); public keys are
// used from browsers anywhere and are bound by the referrer allowlist instead.
import type { FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';
import { isAddressAllowed } from '../orgs/ip-allowlist.js';

export function checkIpAllowlist(request: FastifyRequest): void {
  const principal = request.principal!;
  if (principal.key.kind === 'public' || principal.ipAllowlist.length === 0) return;
  if (!isAddressAllowed(request.ip, principal.ipAllowlist)) {
    throw new ApiError(
      'ip_not_allowed',
      `source address ${request.ip} is not in the organization's IP allowlist`,
    );
  }
}
