import { describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import { MAX_JSON_DEPTH, nestsDeeperThan, parseJsonBody } from './json-body.js';

const nested = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

describe('nestsDeeperThan', () => {
  it.each<[string, string, number, boolean]>([
    ['flat object', '{"a":1,"b":[1,2]}', 2, false],
    ['exactly the limit', '[[[]]]', 3, false],
    ['one past the limit', '[[[[]]]]', 3, true],
    ['siblings do not add up', '[[],[],[],[]]', 2, false],
    ['brackets inside strings do not count', '{"a":"[[[[[[{{{{"}', 1, false],
    ['an escaped quote does not end the string', '{"a":"\\"[[[["}', 1, false],
    ['an escaped backslash before the closing quote', '{"a":"\\\\","b":[[[]]]}', 2, true],
    ['a scalar', '"just text"', 0, false],
  ])('%s', (_name, text, max, expected) => {
    expect(nestsDeeperThan(text, max)).toBe(expected);
  });
});

describe('parseJsonBody', () => {
  it('parses bodies up to the depth limit, and an empty body as {}', () => {
    expect(parseJsonBody(nested(MAX_JSON_DEPTH))).toBeTypeOf('object');
    expect(parseJsonBody('')).toEqual({});
  });

  it.each<[string, string, RegExp]>([
    ['a body nested past the limit (200,000 levels fit in 1.2 MB)', nested(200_000), /deeper than 64 levels/],
    ['one level past the limit', nested(MAX_JSON_DEPTH + 1), /deeper than 64 levels/],
    ['malformed JSON', '{"a":', /malformed JSON body/],
    ['__proto__', '{"__proto__":{"admin":true}}', /malformed JSON body/],
    ['constructor.prototype', '{"constructor":{"prototype":{"admin":true}}}', /malformed JSON body/],
  ])('refuses %s with 400 invalid_request', (_name, text, message) => {
    try {
      parseJsonBody(text);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ type: 'invalid_request', status: 400, message: expect.stringMatching(message) });
    }
  });
});
