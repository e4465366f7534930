import { describe, expect, it } from 'vitest';
import { grammarAmbiguity, grammarAmbiguityProblem, MAX_GRAMMAR_AMBIGUITY } from './grammar-ambiguity.js';

/** The auditor's schema: `depth` levels, each an anyOf of three arrays differing only in maxItems, chained by $ref. */
function nestedArrays(depth: number, alternatives = 3): Record<string, unknown> {
  const $defs: Record<string, unknown> = { l0: { type: 'string', maxLength: 4 } };
  for (let i = 1; i <= depth; i++) {
    $defs[`l${i}`] = { anyOf: Array.from({ length: alternatives }, (_, j) => ({ type: 'array', items: { $ref: `#/$defs/l${i - 1}` }, minItems: 1, maxItems: j + 2 })) };
  }
  return { type: 'object', properties: { a: { $ref: `#/$defs/l${depth}` } }, required: ['a'], additionalProperties: false, $defs };
}

const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
const union = (...anyOf: unknown[]) => ({ anyOf });

describe('grammarAmbiguity', () => {
  it.each<[string, Record<string, unknown>, number]>([
    ['no union', obj({ a: { type: 'string' }, b: { type: 'array', items: { type: 'integer' } } }), 1],
    ['a nullable field (alternatives of different types)', obj({ a: union({ type: 'string' }, { type: 'null' }) }), 1],
    ['a type list', obj({ a: { type: ['string', 'integer', 'null'] } }), 1],
    ['integer or number: both begin with a digit', obj({ a: union({ type: 'integer' }, { type: 'number' }) }), 2],
    ['a discriminated union of three objects', obj({ a: union(obj({ k: { const: 'x' } }), obj({ k: { const: 'y' } }), obj({ k: { const: 'z' } })) }), 3],
    ['enum values count by their type', obj({ a: union({ enum: ['a', 'b'] }, { type: 'string' }, { enum: [1, null] }) }), 2],
    ['sibling unions do not multiply (a finished alternative merges)', obj({ a: union({ type: 'integer' }, { type: 'number' }), b: union({ type: 'integer' }, { type: 'number' }) }), 2],
    ['nested unions multiply', obj({ a: union({ type: 'array', items: union({ type: 'integer' }, { type: 'number' }) }, { type: 'array', maxItems: 2 }) }), 4],
    ['three nested levels of three', nestedArrays(3), 27],
    ['four nested levels of three', nestedArrays(4), 81],
    ['the auditor\'s ten levels', nestedArrays(10), 3 ** 10],
    ['recursion through a nullable ref is bounded', { type: 'object', properties: { next: union({ $ref: '#' }, { type: 'null' }) }, required: ['next'] }, 1],
    ['recursion through two object alternatives is not', { type: 'object', properties: { child: union({ $ref: '#' }, obj({ leaf: { type: 'string' } })) } }, Infinity],
    ['a $defs entry no $ref uses counts for nothing', { ...obj({ a: { type: 'string' } }), $defs: { x: union({ type: 'integer' }, { type: 'number' }) } }, 1],
  ])('%s: %d', (_name, schema, product) => {
    expect(grammarAmbiguity(schema).product).toBe(product);
  });

  it(`refuses above ${MAX_GRAMMAR_AMBIGUITY}, naming the outermost union of the worst chain`, () => {
    expect(grammarAmbiguityProblem(nestedArrays(3))).toBeUndefined();
    expect(grammarAmbiguityProblem(nestedArrays(10))).toEqual({ path: '$defs.l10.anyOf', message: expect.stringContaining('59049 parses') });
    expect(grammarAmbiguityProblem({ type: 'object', properties: { child: union({ $ref: '#' }, obj({})) } })).toEqual({
      path: 'properties.child.anyOf',
      message: expect.stringContaining('recursive $ref'),
    });
  });

  it('walks a long chain of references without running out of stack or time', () => {
    const $defs: Record<string, unknown> = { d0: { type: 'string' } };
    for (let i = 1; i < 1_900; i++) $defs[`d${i}`] = obj({ a: { $ref: `#/$defs/d${i - 1}` }, b: { $ref: `#/$defs/d${i - 1}` } });
    expect(grammarAmbiguity({ ...obj({ x: { $ref: '#/$defs/d1899' } }), $defs }).product).toBe(1);
  });
});
