import { describe, expect, it } from 'vitest';
import { isOriginAllowed, parseOriginPattern, requestOrigin, type OriginPattern } from './referrer-allowlist.js';

const patterns = ['https://*.example.com', 'app.test.dev', 'http://localhost:3000'].map((p) => parseOriginPattern(p)!) as OriginPattern[];
const allowed = (origin: string) => isOriginAllowed(new URL(origin), patterns);

describe('referrer allowlist', () => {
  it.each([
    ['https://a.example.com', true],
    ['https://a.b.example.com', true],
    ['https://example.com', false], // `*.` means a subdomain
    ['http://a.example.com', false], // scheme pinned
    ['https://example.com.evil.org', false],
    ['https://app.test.dev', true],
    ['http://app.test.dev:8080', true], // no scheme or port pinned
    ['http://localhost:3000', true],
    ['http://localhost:3001', false],
  ])('%s -> %s', (origin, expected) => expect(allowed(origin)).toBe(expected));

  it('refuses malformed patterns', () => {
    expect(parseOriginPattern('https://exa mple.com')).toBeUndefined();
    expect(parseOriginPattern('ftp://example.com')).toBeUndefined();
    expect(parseOriginPattern('https://example.com/path')).toBeUndefined();
  });

  it('takes the Origin header first, then the Referer', () => {
    expect(requestOrigin('https://a.example.com', 'https://b.example.com/x')?.hostname).toBe('a.example.com');
    expect(requestOrigin(undefined, 'https://b.example.com/x?y=1')?.hostname).toBe('b.example.com');
    expect(requestOrigin('null', 'not a url')).toBeUndefined();
  });
});
