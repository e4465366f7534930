// Node enrollment tokens and node secrets: prefixed base62 values of 256 bits whose
// SHA-256 is all the store keeps, plus the pure rules that say why a token is refused.
import { hash, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '@svc/shared/ids';
import type { EnrollmentTokenRecord } from '../store/node-store.js';

export const ENROLLMENT_TOKEN_PREFIX = 'svc_nt_';
export const NODE_SECRET_PREFIX = 'svc_ns_';
const SECRET_LENGTH = 43; // 43 base62 characters carry 256 bits

export const generateEnrollmentToken = (): string => ENROLLMENT_TOKEN_PREFIX + randomBase62(SECRET_LENGTH);
export const generateNodeSecret = (): string => NODE_SECRET_PREFIX + randomBase62(SECRET_LENGTH);
export const hashSecret = (value: string): Buffer => hash('sha256', value, 'buffer');

/** Constant-time comparison of a presented secret's digest (hashSecret) with the stored one. */
export function digestMatches(presented: Buffer, storedHash: Buffer): boolean {
  return presented.length === storedHash.length && timingSafeEqual(presented, storedHash);
}

export type TokenState = 'active' | 'used' | 'expired' | 'revoked';

export function tokenState(token: Pick<EnrollmentTokenRecord, 'usedAt' | 'revokedAt' | 'expiresAt'>, now: number): TokenState {
  if (token.usedAt !== null) return 'used';
  if (token.revokedAt !== null) return 'revoked';
  if (token.expiresAt <= now) return 'expired';
  return 'active';
}

/** The message the agent prints when Enroll is refused. Never says more than the holder knows. */
export function enrollRefusal(token: EnrollmentTokenRecord | undefined, now: number): string {
  const fix = 'create a new one with `svcctl nodes token create` and start the agent with SVC_NODE_TOKEN set to it';
  if (!token) return `enrollment token not recognized; ${fix}`;
  const state = tokenState(token, now);
  if (state === 'used') return `enrollment token ${token.id} was already used (tokens are single-use); ${fix}`;
  if (state === 'revoked') return `enrollment token ${token.id} was revoked; ${fix}`;
  if (state === 'expired') return `enrollment token ${token.id} expired at ${new Date(token.expiresAt).toISOString()}; ${fix}`;
  return `enrollment token ${token.id} could not be used; ${fix}`;
}

const TTL_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `90s`, `30m`, `24h`, `7d` or plain seconds -> seconds; undefined for anything else. */
export function parseTtlSeconds(text: string): number | undefined {
  const match = /^(\d+)\s*([smhd]?)$/.exec(text.trim());
  if (!match) return undefined;
  const seconds = Number(match[1]) * TTL_UNITS[match[2] || 's']!;
  return seconds > 0 ? seconds : undefined;
}
