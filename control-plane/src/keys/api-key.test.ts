import { describe, expect, it } from 'vitest';
import { generateKeyValue, hashKeyValue, kindOfKeyValue } from './api-key.js';

describe('API key values', () => {
  it('carries the kind prefix and 43 base62 characters (256 bits)', () => {
    expect(generateKeyValue('live')).toMatch(/^svc_sk_live_[0-9A-Za-z]{43}$/);
    expect(generateKeyValue('test')).toMatch(/^svc_sk_test_[0-9A-Za-z]{43}$/);
    expect(generateKeyValue('public')).toMatch(/^svc_pk_live_[0-9A-Za-z]{43}$/);
  });

  it('never repeats and uses the whole alphabet', () => {
    const values = Array.from({ length: 2000 }, () => generateKeyValue('live').slice(12));
    expect(new Set(values).size).toBe(values.length);
    expect(new Set(values.join('')).size).toBe(62);
  });

  it('recognises well-formed values only', () => {
    const value = generateKeyValue('public');
    expect(kindOfKeyValue(value)).toBe('public');
    expect(kindOfKeyValue(value.slice(0, -1))).toBeUndefined();
    expect(kindOfKeyValue(`${value}x`)).toBeUndefined();
    expect(kindOfKeyValue('svc_sk_prod_' + value.slice(12))).toBeUndefined();
  });

  it('hashes with SHA-256', () => {
    expect(hashKeyValue('abc').toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
