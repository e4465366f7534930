import { describe, expect, it } from 'vitest';
import { paramFromPointer } from './validation.js';

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
