import { describe, expect, it } from 'vitest';
import { Readable } from 'node:stream';
import { answerFate, asksForRetry, requestFingerprint } from './idempotency.js';

describe('requestFingerprint', () => {
  const base = requestFingerprint('POST', '/v1/chat/completions', {}, { b: 1, a: 2 });
  const cases: Array<[string, string, boolean]> = [
    ['same body in another key order', requestFingerprint('POST', '/v1/chat/completions', {}, { a: 2, b: 1 }), true],
    ['headers that change nothing', requestFingerprint('POST', '/v1/chat/completions', { 'x-request-id': 'r', referer: 'x' }, { a: 2, b: 1 }), true],
    ['another X-Service-Pool', requestFingerprint('POST', '/v1/chat/completions', { 'x-service-pool': 'eu' }, { a: 2, b: 1 }), false],
    ['another body', requestFingerprint('POST', '/v1/chat/completions', {}, { a: 3, b: 1 }), false],
    ['another path', requestFingerprint('POST', '/v1/embeddings', {}, { a: 2, b: 1 }), false],
    ['no query', requestFingerprint('POST', '/v1/chat/completions', {}, { a: 2, b: 1 }, {}), true],
    ['a query', requestFingerprint('POST', '/v1/chat/completions', {}, { a: 2, b: 1 }, { force: true }), false],
  ];
  it.each(cases)('%s', (_name, hash, same) => {
    expect(hash === base).toBe(same);
  });
  it('reads the pool case- and space-insensitively', () => {
    expect(requestFingerprint('POST', '/p', { 'x-service-pool': ' EU ' }, {})).toBe(requestFingerprint('POST', '/p', { 'x-service-pool': 'eu' }, {}));
  });
});

describe('asksForRetry', () => {
  const error = (type: string) => JSON.stringify({ error: { type, message: 'm' } });
  const cases: Array<[number, string, boolean]> = [
    [503, error('pool_degraded'), true],
    [409, error('no_capacity'), true],
    [503, error('service_unavailable'), true],
    [409, error('conflict'), true],
    [404, error('not_found'), false],
    [400, error('invalid_request'), false],
    [500, error('internal_error'), false],
    [201, '{"error":{"type":"no_capacity"}}', false],
    [503, 'not json', false],
  ];
  it.each(cases)('%i %s', (status, body, expected) => {
    expect(asksForRetry(status, body)).toBe(expected);
  });
});

describe('answerFate', () => {
  const error = (type: string) => JSON.stringify({ error: { type, message: 'm' } });
  const MAX = 64;
  const cases: Array<[string, number, unknown, string]> = [
    ['a small answer', 201, '{"id":"x"}', 'store'],
    ['an answer of exactly the limit', 200, 'x'.repeat(MAX), 'store'],
    ['one byte over the limit', 200, 'x'.repeat(MAX + 1), 'too_large'],
    ['over the limit in UTF-8 bytes, not characters', 200, 'é'.repeat(MAX / 2 + 1), 'too_large'],
    ['a Buffer over the limit', 200, Buffer.alloc(MAX + 1, 0x78), 'too_large'],
    ['a Buffer within it', 200, Buffer.from('{}'), 'store'],
    ['a stored error', 404, error('not_found'), 'store'],
    ['an error asking for a retry', 503, error('pool_degraded'), 'retry'],
    ['a stream', 200, Readable.from(['data: x\n\n']), 'stream'],
  ];
  it.each(cases)('%s', (_name, status, payload, fate) => {
    expect(answerFate(status, payload, MAX)).toBe(fate);
  });
});
