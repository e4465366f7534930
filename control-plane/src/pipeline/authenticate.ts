// Step 2: `Authorization: Bearer <API_KEY>`. Every failure is 401 `unauthorized`; the
// key value itself is never logged or echoed.
import type { FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';
import type { Verification } from '../keys/key-verifier.js';

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

/** The presented key value, or a 401 for a missing or malformed header. */
export function bearerKey(request: FastifyRequest): string {
  const header = request.headers.authorization;
  if (!header) throw new ApiError('unauthorized', 'missing API key: send "Authorization: Bearer <API_KEY>"');
  const match = BEARER.exec(header);
  if (!match) throw new ApiError('unauthorized', 'malformed Authorization header: expected "Bearer <API_KEY>"');
  return match[1]!;
}

export function authenticate(request: FastifyRequest, verification: Verification): void {
  if (!verification.ok) throw new ApiError('unauthorized', verification.reason);
  request.principal = verification.principal;
}
