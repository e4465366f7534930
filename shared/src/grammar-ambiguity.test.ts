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

/** Pydantic's recursive discriminated union: Group{type: "group", children: [Text | Group]}; `required` optional (the grammar writes every property). */
function tree(required: boolean): Record<string, unknown> {
  const o = (properties: Record<string, unknown>) => (required ? obj(properties) : { type: 'object', properties });
  return {
    ...o({ root: { $ref: '#/$defs/Group' } }),
    $defs: {
      Text: o({ type: { const: 'text' }, text: { type: 'string' } }),
      Group: o({ type: { const: 'group' }, children: { type: 'array', items: union({ $ref: '#/$defs/Text' }, { $ref: '#/$defs/Group' }) } }),
    },
  };
}

/** Any JSON value, recursively: integer and number share a start, but nothing nests inside them. */
const jsonValue = {
  ...obj({ v: { $ref: '#/$defs/J' } }),
  $defs: { J: union({ type: 'string' }, { type: 'integer' }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }, { type: 'array', items: { $ref: '#/$defs/J' } }, { type: 'object', additionalProperties: { $ref: '#/$defs/J' } }) },
};

/** `depth` levels of a list of blocks, each one of three objects told apart by `kind`. */
const blocks = (depth: number, kinds = ['a', 'b', 'c']): Record<string, unknown> =>
  depth === 0 ? { type: 'string' } : { type: 'array', items: union(...kinds.map((k) => obj({ kind: { const: k }, body: blocks(depth - 1, kinds) }))) };
/** The same, but the three objects begin alike (the same first key, no literal): they stay alive together. */
const lookalikes = (depth: number): Record<string, unknown> =>
  depth === 0 ? { type: 'string' } : { type: 'array', items: union(...[1, 2, 3].map((n) => ({ ...obj({ body: lookalikes(depth - 1) }), title: `v${n}` }))) };

describe('grammarAmbiguity', () => {
  it.each<[string, Record<string, unknown>, number]>([
    ['no union', obj({ a: { type: 'string' }, b: { type: 'array', items: { type: 'integer' } } }), 1],
    ['a nullable field (alternatives of different types)', obj({ a: union({ type: 'string' }, { type: 'null' }) }), 1],
    ['a type list', obj({ a: { type: ['string', 'integer', 'null'] } }), 1],
    ['integer or number: both begin with a digit', obj({ a: union({ type: 'integer' }, { type: 'number' }) }), 2],
    ['a discriminated union of three objects parts at the first key\'s value', obj({ a: union(obj({ k: { const: 'x' } }), obj({ k: { const: 'y' } }), obj({ k: { enum: ['z', 'w'] } })) }), 1],
    ['objects part at their first key (in properties order, required or not)', obj({ a: union(obj({ x: { type: 'array' }, k: { const: 1 } }), { type: 'object', properties: { y: { type: 'array' } } }) }), 1],
    ['objects with the same first key and no literal there share a start', obj({ a: union(obj({ k: { type: 'string' } }), obj({ k: { const: 'y' } }), obj({ k: { type: 'array' }, j: {} })) }), 3],
    ['a literal first value through a $ref parts too', { ...obj({ a: union({ $ref: '#/$defs/X' }, { $ref: '#/$defs/Y' }) }), $defs: { K: { const: 'x' }, X: obj({ k: { $ref: '#/$defs/K' }, v: { type: 'array' } }), Y: obj({ k: { const: 'y' }, v: { type: 'array' } }) } }, 1],
    ['an object of any members shares with every object', obj({ a: union(obj({ k: { const: 'x' } }), obj({ k: { const: 'y' } }), { type: 'object' }) }), 2],
    ['the empty object parts from one with a key', obj({ a: union(obj({ k: { const: 'x' } }), obj({})) }), 1],
    ['string literals part from each other, not from a string', obj({ a: union({ const: 'x' }, { const: 'y' }, { enum: ['z', 1] }, { type: 'string' }) }), 2],
    ['enum values count by their type', obj({ a: union({ enum: ['a', 'b'] }, { type: 'string' }, { enum: [1, null] }) }), 2],
    ['sibling unions do not multiply (a finished alternative merges)', obj({ a: union({ type: 'integer' }, { type: 'number' }), b: union({ type: 'integer' }, { type: 'number' }) }), 2],
    ['nested unions multiply', obj({ a: union({ type: 'array', items: union({ type: 'integer' }, { type: 'number' }) }, { type: 'array', maxItems: 2 }) }), 4],
    ['products run only through alternatives that share a start', { ...obj({ a: union({ type: 'integer' }, { type: 'number' }, { type: 'array', items: { $ref: '#/$defs/l3' } }) }), $defs: nestedArrays(3).$defs }, 27],
    ['a repeated type in a type list is a union of alike alternatives', obj({ a: { type: ['array', 'array'], items: { type: ['integer', 'number'] } } }), 4],
    ['three nested levels of three', nestedArrays(3), 27],
    ['four nested levels of three', nestedArrays(4), 81],
    ['the auditor\'s ten levels', nestedArrays(10), 3 ** 10],
    ['recursion through a nullable ref is bounded', { type: 'object', properties: { next: union({ $ref: '#' }, { type: 'null' }) }, required: ['next'] }, 1],
    ['recursion through two objects of different first keys is bounded', { type: 'object', properties: { child: union({ $ref: '#' }, obj({ leaf: { type: 'string' } })) } }, 1],
    ['recursion through two objects of one first key is not', { type: 'object', properties: { child: union({ $ref: '#' }, obj({ child: { type: 'string' } })) } }, Infinity],
    ['recursion through an ambiguous array union is not', { $defs: { A: union({ type: 'array', items: { $ref: '#/$defs/A' } }, { type: 'array', maxItems: 1 }) }, ...obj({ a: { $ref: '#/$defs/A' } }) }, Infinity],
    ['a Pydantic recursive discriminated union', tree(true), 1],
    ['the same without required', tree(false), 1],
    ['any JSON value, recursively (the ambiguous pair is not on the cycle)', jsonValue, 2],
    ['five levels of blocks told apart by kind', obj({ doc: blocks(5) }), 1],
    ['three levels of blocks that begin alike', obj({ doc: lookalikes(3) }), 27],
    ['five levels of blocks that begin alike', obj({ doc: lookalikes(5) }), 243],
    ['a $defs entry no $ref uses counts for nothing', { ...obj({ a: { type: 'string' } }), $defs: { x: union({ type: 'integer' }, { type: 'number' }) } }, 1],
  ])('%s: %d', (_name, schema, product) => {
    expect(grammarAmbiguity(schema).product).toBe(product);
  });

  it(`refuses above ${MAX_GRAMMAR_AMBIGUITY}, naming the outermost union of the worst chain`, () => {
    expect(grammarAmbiguityProblem(nestedArrays(3))).toBeUndefined();
    expect(grammarAmbiguityProblem(nestedArrays(10))).toEqual({ path: '$defs.l10.anyOf', message: expect.stringContaining('59049 parses') });
    expect(grammarAmbiguityProblem(obj({ doc: blocks(5) }))).toBeUndefined();
    expect(grammarAmbiguityProblem(tree(true))).toBeUndefined();
    expect(grammarAmbiguityProblem(jsonValue)).toBeUndefined();
    expect(grammarAmbiguityProblem(nestedArrays(8))).toEqual({ path: '$defs.l8.anyOf', message: expect.stringContaining('6561 parses') });
    expect(grammarAmbiguityProblem({ type: 'object', properties: { child: union({ $ref: '#' }, { type: 'object' }) } })).toEqual({
      path: 'properties.child.anyOf',
      message: expect.stringContaining('recursive $ref'),
    });
    const dup = (depth: number): Record<string, unknown> => (depth === 0 ? { type: 'string' } : { type: ['array', 'array'], items: dup(depth - 1) });
    expect(grammarAmbiguityProblem(obj({ a: dup(7) }))).toEqual({ path: 'properties.a.type', message: expect.stringContaining('128 parses') });
  });

  it('walks a long chain of references without running out of stack or time', () => {
    const $defs: Record<string, unknown> = { d0: { type: 'string' } };
    for (let i = 1; i < 1_900; i++) $defs[`d${i}`] = obj({ a: { $ref: `#/$defs/d${i - 1}` }, b: { $ref: `#/$defs/d${i - 1}` } });
    expect(grammarAmbiguity({ ...obj({ x: { $ref: '#/$defs/d1899' } }), $defs }).product).toBe(1);
  });
});
