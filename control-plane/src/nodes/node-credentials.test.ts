import { describe, expect, it } from 'vitest';
import {
  enrollRefusal,
  generateEnrollmentToken,
  generateNodeSecret,
  hashSecret,
  parseTtlSeconds,
  digestMatches,
  tokenState,
} from './node-credentials.js';
import type { EnrollmentTokenRecord } from '../store/node-store.js';

const token = (over: Partial<EnrollmentTokenRecord> = {}): EnrollmentTokenRecord => ({
  id: 'ntk_1',
  hash: Buffer.alloc(32),
  pool: null,
  createdAt: 0,
  expiresAt: 1000,
  usedAt: null,
  usedByNode: null,
  revokedAt: null,
  ...over,
});

describe('node credentials', () => {
  it('generates prefixed 256-bit values and matches only the right secret', () => {
    expect(generateEnrollmentToken()).toMatch(/^svc_nt_[0-9A-Za-z]{43}$/);
    const secret = generateNodeSecret();
    expect(secret).toMatch(/^svc_ns_[0-9A-Za-z]{43}$/);
    expect(digestMatches(hashSecret(secret), hashSecret(secret))).toBe(true);
    expect(digestMatches(hashSecret(`${secret}x`), hashSecret(secret))).toBe(false);
    expect(digestMatches(hashSecret(secret), Buffer.alloc(3))).toBe(false);
  });

  it('derives token state with used and revoked before expiry', () => {
    expect(tokenState(token(), 999)).toBe('active');
    expect(tokenState(token(), 1000)).toBe('expired');
    expect(tokenState(token({ usedAt: 5 }), 5000)).toBe('used');
    expect(tokenState(token({ revokedAt: 5 }), 10)).toBe('revoked');
  });

  it('explains every refusal and how to fix it', () => {
    expect(enrollRefusal(undefined, 0)).toMatch(/not recognized.*svcctl nodes token create/);
    expect(enrollRefusal(token({ usedAt: 1 }), 0)).toMatch(/ntk_1 was already used/);
    expect(enrollRefusal(token({ revokedAt: 1 }), 0)).toMatch(/ntk_1 was revoked/);
    expect(enrollRefusal(token(), 2000)).toMatch(/ntk_1 expired at 1970-01-01T00:00:01.000Z/);
  });

  it('parses TTLs with units', () => {
    expect(parseTtlSeconds('90')).toBe(90);
    expect(parseTtlSeconds('30m')).toBe(1800);
    expect(parseTtlSeconds('24h')).toBe(86_400);
    expect(parseTtlSeconds('7d')).toBe(604_800);
    expect(parseTtlSeconds('0')).toBeUndefined();
    expect(parseTtlSeconds('1w')).toBeUndefined();
    expect(parseTtlSeconds('-5m')).toBeUndefined();
  });
});
