// The engine's one credential: with --api-key (or SVC_ENGINE_API_KEY) every endpoint but
// /health needs `Authorization: Bearer <key>`, as vLLM's --api-key does. The control plane
// gives each replica its own key, so a replica's published port is useless to anyone who
// reaches it without going through the control plane (its keys, limits and billing).
import { createHash, timingSafeEqual } from 'node:crypto';

/** The only path answered without the key: the agent's health probe. It reveals nothing. */
export const OPEN_PATH = '/health';

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * True when `authorization` is `Bearer <key>`. Compared in constant time over fixed-length
 * digests, so neither the key's content nor its length leaks through timing.
 */
export function bearerMatches(authorization: string | undefined, key: string): boolean {
  const match = /^Bearer +(.+)$/i.exec(authorization ?? '');
  const presented = match ? match[1]!.trim() : '';
  // Always compare, even without a bearer: the same work whatever was sent.
  const same = timingSafeEqual(digest(presented), digest(key));
  return match !== null && same;
}

/** Whether a request for `path` may be served: no key configured, the open path, or the right bearer. */
export function authorized(path: string, authorization: string | undefined, key: string | undefined): boolean {
  if (key === undefined || path === OPEN_PATH) return true;
  return bearerMatches(authorization, key);
}
