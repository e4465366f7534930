import { describe, expect, it } from 'vitest';
import { authorized, bearerMatches } from './auth.js';

const KEY = 'rk_3f9a0c1b2d4e5f60718293a4b5c6d7e8';

describe('bearerMatches', () => {
  it.each([
    ['the right bearer', `Bearer ${KEY}`, true],
    ['the scheme in any case', `bearer ${KEY}`, true],
    ['extra spaces after the scheme', `Bearer   ${KEY}`, true],
    ['no header', undefined, false],
    ['an empty header', '', false],
    ['the key without the scheme', KEY, false],
    ['another scheme', `Basic ${KEY}`, false],
    ['a wrong key', 'Bearer rk_wrong', false],
    ['a prefix of the key', `Bearer ${KEY.slice(0, -1)}`, false],
    ['the key and more', `Bearer ${KEY}x`, false],
    ['an empty bearer', 'Bearer ', false],
  ])('%s', (_name, header, expected) => {
    expect(bearerMatches(header, KEY)).toBe(expected);
  });
});

describe('authorized', () => {
  it.each([
    ['no key configured: everything open', '/v1/chat/completions', undefined, undefined, true],
    ['/health needs no key', '/health', undefined, KEY, true],
    ['chat without the key', '/v1/chat/completions', undefined, KEY, false],
    ['models without the key', '/v1/models', undefined, KEY, false],
    ['an unknown path without the key (no route map for strangers)', '/nope', undefined, KEY, false],
    ['a path that only starts like /health', '/health/x', undefined, KEY, false],
    ['chat with the key', '/v1/chat/completions', `Bearer ${KEY}`, KEY, true],
  ])('%s', (_name, path, header, key, expected) => {
    expect(authorized(path, header, key)).toBe(expected);
  });
});
