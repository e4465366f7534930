import { describe, expect, it } from 'vitest';
import { foundState, idempotencyRow, isExpired, type IdempotencyRow } from './idempotency-rows.js';

const NOW = 1_000_000;
const answer = { statusCode: 201, headers: { 'content-type': 'application/json' }, body: '{"id":"x"}' };
const row = (patch: Partial<IdempotencyRow>): IdempotencyRow => ({ requestHash: 'h', state: 'in_progress', leaseUntil: NOW + 1, expiresAt: NOW + 1, response: null, ...patch });
const completed = (expiresAt: number) => row({ state: 'completed', response: answer, leaseUntil: 0, expiresAt });

describe('isExpired', () => {
  const cases: Array<[string, IdempotencyRow, boolean]> = [
    ['an answer within its window', completed(NOW + 1), false],
    ['an answer at the end of its window', completed(NOW), true],
    ['a claim within its window', row({}), false],
    ['a claim past its window whose process still renews it', row({ expiresAt: NOW - 1, leaseUntil: NOW + 1 }), false],
    ['a claim past its window whose lease ran out', row({ expiresAt: NOW - 1, leaseUntil: NOW }), true],
    ['a claim within its window whose lease ran out (taken over, not expired)', row({ expiresAt: NOW + 1, leaseUntil: NOW - 1 }), false],
  ];
  it.each(cases)('%s', (_name, r, expired) => {
    expect(isExpired(r, NOW)).toBe(expired);
  });
});

describe('foundState', () => {
  const cases: Array<[string, IdempotencyRow | undefined, string, object]> = [
    ['no row', undefined, 'h', { state: 'absent' }],
    ['an answer to the same request', completed(NOW + 1), 'h', { state: 'completed', response: answer }],
    ['an answer to another request', completed(NOW + 1), 'other', { state: 'mismatch' }],
    ['an expired answer to another request', completed(NOW), 'other', { state: 'absent' }],
    ['a live claim of the same request', row({}), 'h', { state: 'in_progress' }],
    ['a live claim past its window', row({ expiresAt: NOW - 5 }), 'h', { state: 'in_progress' }],
    ['a dead claim of the same request (the claim step takes it over)', row({ leaseUntil: NOW }), 'h', { state: 'absent' }],
    ['a dead claim of another request', row({ leaseUntil: NOW }), 'other', { state: 'mismatch' }],
  ];
  it.each(cases)('%s', (_name, r, hash, found) => {
    expect(foundState(r, hash, NOW)).toEqual(found);
  });
});

describe('idempotencyRow', () => {
  it('reads either engine: BIGINTs as strings, an answer only when completed', () => {
    const stored = { request_hash: 'h', state: 'completed', lease_until: '5', expires_at: '300005', status_code: 201, headers: '{"content-type":"application/json"}', body: '{"id":"x"}' };
    expect(idempotencyRow(stored)).toEqual({ requestHash: 'h', state: 'completed', leaseUntil: 5, expiresAt: 300_005, response: answer });
    expect(idempotencyRow({ ...stored, state: 'in_progress', status_code: null, headers: null, body: null }).response).toBeNull();
  });
});
