import { describe, expect, it } from 'vitest';
import { paramFromPointer, validationError } from './validation.js';

describe('paramFromPointer', () => {
  it.each([
    ['', undefined, undefined],
    ['', 'model', 'model'],
    ['/messages/0/role', undefined, 'messages[0].role'],
    ['/messages/2', 'content', 'messages[2].content'],
    ['/scopes/1', undefined, 'scopes[1]'],
    ['/a~1b', undefined, 'a/b'],
  ])('%s + %s -> %s', (pointer, child, param) => expect(paramFromPointer(pointer, child)).toBe(param));
});

describe('validationError', () => {
  it('names a field with an empty name (a query string like "?=x") instead of "undefined"', () => {
    const error = validationError([{ keyword: 'additionalProperties', instancePath: '', schemaPath: '', params: { additionalProperty: '' } }], 'querystring');
    expect(error).toMatchObject({ type: 'invalid_request', message: 'unsupported field: ""', param: '""' });
  });
});
