// Step 4: public (browser) keys, `svc_pk_live_`, call only embeddings and the model
// catalog, and only from an origin in the org's referrer allowlist.
import type { FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';
import { isOriginAllowed, requestOrigin } from '../orgs/referrer-allowlist.js';

export function checkPublicKeyRules(request: FastifyRequest, routeAllowsPublicKeys: boolean): void {
  const principal = request.principal!;
  if (principal.key.kind !== 'public') return;
  if (!routeAllowsPublicKeys) {
    throw new ApiError('forbidden_scope', 'public keys (svc_pk_live_) may only call /v1/embeddings and /v1/models');
  }
  if (principal.referrerAllowlist.length === 0) {
    throw new ApiError('referrer_not_allowed', 'public keys require a referrer allowlist on the organization; none is set');
  }
  const origin = requestOrigin(request.headers.origin, request.headers.referer);
  if (!origin) {
    throw new ApiError('referrer_not_allowed', 'public keys must be used from a web page: no Origin or Referer header was sent');
  }
  if (!isOriginAllowed(origin, principal.referrerAllowlist)) {
    throw new ApiError('referrer_not_allowed', `origin ${origin.origin} is not in the organization's referrer allowlist`);
  }
}
