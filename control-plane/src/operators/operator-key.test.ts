import { describe, expect, it } from 'vitest';
import { generateKeyValue, kindOfKeyValue } from '../keys/api-key.js';
import { generateOperatorKeyValue, grants, isOperatorKeyValue, looksLikeOperatorKey } from './operator-key.js';

describe('operator key values', () => {
  it('carry their own prefix and 256 bits that never repeat', () => {
    const values = Array.from({ length: 1000 }, generateOperatorKeyValue);
    for (const v of values) expect(v).toMatch(/^svcop_[0-9A-Za-z]{43}$/);
    expect(new Set(values).size).toBe(values.length);
  });

  it('are never taken for customer keys, nor customer keys for them', () => {
    const operator = generateOperatorKeyValue();
    expect(kindOfKeyValue(operator)).toBeUndefined();
    for (const kind of ['live', 'test', 'public'] as const) expect(isOperatorKeyValue(generateKeyValue(kind))).toBe(false);
    expect(isOperatorKeyValue(`${operator}x`)).toBe(false);
    expect(isOperatorKeyValue(operator.toUpperCase())).toBe(false);
    expect(looksLikeOperatorKey('svcop_x')).toBe(true);
  });

  it.each([
    [['operator:read'], 'operator:read', true],
    [['operator:read'], 'operator:write', false],
    [['operator:write'], 'operator:read', true],
    [['operator:write'], 'operator:write', true],
    [[], 'operator:read', false],
  ] as const)('%j grants %s: %s', (held, wanted, expected) => {
    expect(grants(held, wanted)).toBe(expected);
  });
});
