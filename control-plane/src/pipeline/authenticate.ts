// Step 2: `Authorization: Bearer <API_KEY>`. Every failure is 401 `unauthorized`; the
// key value itself is never logged or echoed.
import type { FastifyRequest } from 'fastify';
import { ApiError } from '@svc/shared';
import type { KeyVerifier } from '../keys/key-verifier.js';

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

export function authenticate(verifier: KeyVerifier) {
  return async function authenticateRequest(request: FastifyRequest): Promise<void> {
    const header = request.headers.authorization;
    if (!header) throw new ApiError('unauthorized', 'missing API key: send "Authorization: Bearer <API_KEY>"');
    const match = BEARER.exec(header);
    if (!match) throw new ApiError('unauthorized', 'malformed Authorization header: expected "Bearer <API_KEY>"');
    const result = await verifier.verify(match[1]!);
    if (!result.ok) throw new ApiError('unauthorized', result.reason);
    request.principal = result.principal;
  };
}
