import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { grammarSchemaProblem } from './engine-features.js';
import { responseFormatProblem, toolParametersProblem, type ResponseFormat } from './response-format.js';
import { minimalInstance, UNSATISFIABLE } from './schema-instance.js';

const closed = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false, ...extra });
const format = (schema: Record<string, unknown>, strict: boolean | undefined = true): ResponseFormat =>
  ({ type: 'json_schema', json_schema: { name: 'out', schema, ...(strict === undefined ? {} : { strict }) } });

/** Objects nested `depth` deep, each with one property `c`. */
function nested(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) schema = closed({ c: schema });
  return schema;
}

const P = 'response_format.json_schema.schema';

describe('responseFormatProblem', () => {
  it.each<[string, Record<string, unknown>, boolean | undefined, string]>([
    ['a root that is not an object', { type: 'array', items: { type: 'string' } }, true, `${P}.type`],
    ['a schema that is no JSON Schema', { type: 'object', properties: 3 }, false, P],
    ['strict without additionalProperties: false', { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, true, `${P}.additionalProperties`],
    ['strict with an optional property', { ...closed({ a: { type: 'string' }, b: { type: 'string' } }), required: ['a'] }, true, `${P}.required`],
    ['strict with a nested open object', closed({ a: { type: 'object', properties: {} } }), true, `${P}.properties.a.additionalProperties`],
    ['strict with allOf', closed({ a: { allOf: [{ type: 'string' }] } }), true, `${P}.properties.a.allOf`],
    ['strict with an unknown format', closed({ a: { type: 'string', format: 'credit-card' } }), true, `${P}.properties.a.format`],
    ['a $ref to another document', closed({ a: { $ref: 'https://example.com/s.json' } }), false, `${P}.properties.a`],
    ['a $ref to a missing definition', closed({ a: { $ref: '#/$defs/nope' } }), false, `${P}.properties.a`],
    ['a $ref cycle through references alone', closed({ a: { $ref: '#/$defs/x' } }, { $defs: { x: { $ref: '#/$defs/y' }, y: { $ref: '#/$defs/x' } } }), false, `${P}.$defs.y`],
    ['recursion through a required property with no way out', closed({ a: { $ref: '#/$defs/n' } }, { $defs: { n: closed({ next: { $ref: '#/$defs/n' } }) } }), true, P],
    ['objects nested 11 deep', nested(11), true, `${P}.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c`],
    ['1,001 enum values', closed({ a: { type: 'integer', enum: Array.from({ length: 1001 }, (_, i) => i) } }), true, P],
    ['a huge string enum', closed({ a: { type: 'string', enum: Array.from({ length: 300 }, (_, i) => `value-${i}-${'x'.repeat(60)}`) } }), true, `${P}.properties.a.enum`],
    ['a 1 MB schema', closed({ a: { type: 'string', description: 'x'.repeat(1024 * 1024) } }), false, P],
    ['nesting past the walker bound', { type: 'object', properties: { a: JSON.parse('{"items":'.repeat(40) + '{}' + '}'.repeat(40)) } }, false, P],
    ['a pattern that is no regular expression', closed({ a: { type: 'string', pattern: '(' } }), true, `${P}.properties.a.pattern`],
    ['contradictory bounds', closed({ a: { type: 'integer', minimum: 5, maximum: 1 } }), true, P],
    ['a smallest value past 64 KiB', closed({ a: { type: 'array', items: { type: 'string', minLength: 10_000 }, minItems: 19_000 } }), true, P],
  ])('refuses %s', (_label, schema, strict, param) => {
    expect(responseFormatProblem(format(schema, strict))?.param).toBe(param);
  });

  it.each<[string, Record<string, unknown>, boolean | undefined]>([
    ['a strict closed object', closed({ city: { type: 'string', enum: ['Paris', 'Lima'] }, n: { type: 'integer' } }), true],
    ['an optional property as a union with null', closed({ a: { type: ['string', 'null'] } }), true],
    ['a recursive tree with a way out', closed({ root: { $ref: '#/$defs/node' } }, { $defs: { node: closed({ children: { type: 'array', items: { $ref: '#/$defs/node' } } }) } }), true],
    ['a 2020-12 schema with titles (LangChain)', { $schema: 'https://json-schema.org/draft/2020-12/schema', title: 'x', ...closed({ a: { type: 'string', title: 'a' } }) }, true],
    ['a non-strict schema with optional properties', { type: 'object', properties: { a: { type: 'string' } } }, false],
    ['objects nested 10 deep', nested(10), true],
  ])('accepts %s', (_label, schema, strict) => {
    expect(responseFormatProblem(format(schema, strict))).toBeUndefined();
  });

  it('takes text and json_object as they are', () => {
    expect(responseFormatProblem({ type: 'text' })).toBeUndefined();
    expect(responseFormatProblem({ type: 'json_object' })).toBeUndefined();
  });
});

describe('toolParametersProblem', () => {
  const T = 'tools[2].function.parameters';
  it.each<[string, Record<string, unknown>, string | undefined, RegExp | undefined]>([
    ['a small schema', { type: 'object', properties: { a: { type: 'string' } } }, undefined, undefined],
    ['1,001 enum values', { type: 'object', properties: { a: { enum: Array.from({ length: 1001 }, (_, i) => i) } } }, T, /1001 enum values; at most 1000/],
    ['a huge string enum, named at the enum', { type: 'object', properties: { a: { enum: Array.from({ length: 300 }, (_, i) => `v${i}-${'x'.repeat(60)}`) } } }, `${T}.properties.a.enum`, /at most 15000 characters/],
    ['more than 64 KiB', { type: 'object', description: 'x'.repeat(70_000) }, T, /function parameters are \d+ bytes; at most 65536 are accepted/],
    ['nesting past the walker bound', { type: 'object', properties: { a: JSON.parse('{"items":'.repeat(40) + '{}' + '}'.repeat(40)) } }, T, /refused: the schema nests deeper than 32/],
    ['objects nested 11 deep', nested(11), `${T}.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c.properties.c`, /objects nest deeper than 10/],
    ['no JSON Schema', { type: 'object', properties: 3 }, T, /^function parameters are not a valid JSON Schema \(draft-07\)/],
    // Parameters need no finite value unless a call is forced (the engine's grammar).
    ['recursion with no way out', closed({ a: { $ref: '#' } }), undefined, undefined],
  ])('%s', (_name, schema, param, message) => {
    const problem = toolParametersProblem(schema, T);
    expect(problem?.param).toBe(param);
    if (message) expect(problem?.message).toMatch(message);
  });

  it('gives the verdict on a schema it checked before for another tool named at that tool', () => {
    const schema = { type: 'object', properties: { a: { enum: Array.from({ length: 300 }, (_, i) => `w${i}-${'y'.repeat(60)}`) } } };
    const first = toolParametersProblem(schema, 'tools[0].function.parameters');
    const again = toolParametersProblem(structuredClone(schema), 'tools[5].function.parameters');
    expect(first?.param).toBe('tools[0].function.parameters.properties.a.enum');
    expect(again).toEqual({ param: 'tools[5].function.parameters.properties.a.enum', message: first!.message });
    const fine = { type: 'object', properties: { b: { type: 'integer' } } };
    expect(toolParametersProblem(fine, 'tools[1].function.parameters')).toBeUndefined();
    expect(toolParametersProblem(fine, 'tools[3].function.parameters')).toBeUndefined();
  });
});

describe('minimalInstance', () => {
  const ajv = new Ajv2020({ strict: false });
  it.each<[string, Record<string, unknown>]>([
    ['enums, integers with bounds, formats', closed({ c: { enum: ['b', 'a'] }, n: { type: 'integer', minimum: 3 }, x: { type: 'number', exclusiveMinimum: 0, maximum: 1 }, d: { type: 'string', format: 'date' } })],
    ['arrays with minItems and strings with minLength', closed({ a: { type: 'array', items: { type: 'string', minLength: 2 }, minItems: 2 } })],
    ['a recursive tree', closed({ root: { $ref: '#/$defs/node' } }, { $defs: { node: closed({ kids: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] } }) } })],
    ['multipleOf with a negative maximum', closed({ m: { type: 'integer', multipleOf: 7, maximum: -10 } })],
  ])('builds a valid value for %s', (_label, schema) => {
    const value = minimalInstance(schema);
    expect(value).not.toBe(UNSATISFIABLE);
    expect(ajv.validate(schema, value), JSON.stringify(ajv.errors)).toBe(true);
  });

  it('gives up on exponential schemas within its budget', () => {
    const defs: Record<string, unknown> = {};
    for (let i = 0; i < 30; i++) defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] };
    defs.d30 = closed({ loop: { $ref: '#/$defs/d0' } });
    expect(minimalInstance({ ...closed({ a: { $ref: '#/$defs/d0' } }), $defs: defs })).toBe(UNSATISFIABLE);
  });
});

describe('grammarSchemaProblem (CPU engine)', () => {
  it.each<[Record<string, unknown>, string | undefined]>([
    [closed({ a: { type: 'string', pattern: '^a+$' } }), 'p.properties.a.pattern'],
    [closed({ a: { type: 'number', minimum: 0 } }), 'p.properties.a.minimum'],
    [closed({ a: { type: 'string', format: 'email' } }), 'p.properties.a.format'],
    [closed({ a: { oneOf: [{ type: 'string' }] } }), 'p.properties.a.oneOf'],
    [closed({ a: { enum: [{ x: 1 }] } }), 'p.properties.a.enum'],
    [closed({ a: { description: 'anything' } }), 'p.properties.a'],
    [closed({ a: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 } }), undefined],
    [closed({ a: { anyOf: [{ type: 'string', maxLength: 5 }, { type: 'null' }] }, d: { type: 'string', format: 'date-time' } }), undefined],
  ])('%j -> %s', (schema, param) => {
    expect(grammarSchemaProblem(schema, 'p', 'cpu')?.param).toBe(param);
  });
});
