import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { MAX_INSTANCE_CHARS, minimalInstance, TOO_LARGE, UNSATISFIABLE } from './schema-instance.js';

const object = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'object', properties, required: Object.keys(properties), ...extra });
const arrayOf = (minItems: number, items: unknown) => ({ type: 'array', minItems, items });
const text = (minLength: number) => ({ type: 'string', minLength });

describe('minimalInstance keeps within its size bound', () => {
  // The reported schemas: each asked for hundreds of megabytes of JSON and got them built.
  it.each<[string, Record<string, unknown>]>([
    ['8,000 copies of a 60,000-character const', object({ a: arrayOf(8_000, { const: 'x'.repeat(60_000) }) })],
    ['19,000 strings of 10,000 characters', object({ a: arrayOf(19_000, text(10_000)) })],
    ['one string of a billion characters', object({ a: text(1e9) })],
    ['a billion items', object({ a: arrayOf(1e9, { type: 'null' }) })],
    ['70,000 required properties (their names alone pass the bound)', { type: 'object', required: Array.from({ length: 70_000 }, (_, i) => `p${i}`) }],
    ['nested arrays multiplying each other', object({ a: arrayOf(300, arrayOf(300, { type: 'null' })) })],
  ])('%s: TOO_LARGE', (_name, schema) => {
    expect(minimalInstance(schema)).toBe(TOO_LARGE);
  });

  const ajv = new Ajv2020({ strict: false });
  it.each<[string, Record<string, unknown>, number]>([
    ['strings up to the bound', object({ a: arrayOf(6, text(10_000)) }), 60_025],
    ['a string of minLength past the old 10,000-character cut', object({ a: text(20_000) }), 20_008],
    ['an alternative that fits when the first does not', object({ a: { anyOf: [arrayOf(100_000, { type: 'null' }), { type: 'null' }] } }), 10],
    ['a type that fits when the first does not', object({ a: { type: ['array', 'string'], minItems: 100_000 } }), 15],
  ])('%s: a valid value of the expected length', (_name, schema, length) => {
    const value = minimalInstance(schema);
    expect(value).not.toBe(TOO_LARGE);
    expect(value).not.toBe(UNSATISFIABLE);
    expect(ajv.validate(schema, value), JSON.stringify(ajv.errors)).toBe(true);
    expect(JSON.stringify(value)).toHaveLength(length);
  });

  it('counts every character of the JSON it builds: a value is never longer than the bound, and one exactly at it is taken', () => {
    const schemas = [
      object({ a: arrayOf(3, text(9)), b: { const: { k: ['é', 1.5, null] } }, 'q"uote': { enum: [true] }, n: { type: 'integer', minimum: 123 } }),
      object({ a: arrayOf(2, object({ x: { type: 'boolean' }, y: { type: 'null' } })) }),
    ];
    for (const schema of schemas) {
      const exact = JSON.stringify(minimalInstance(schema)).length;
      expect(JSON.stringify(minimalInstance(schema, 20_000, exact))).toHaveLength(exact);
      expect(minimalInstance(schema, 20_000, exact - 1)).toBe(TOO_LARGE);
    }
    expect(MAX_INSTANCE_CHARS).toBe(65_536);
  });

  it('still tells a schema with no finite value from one with no small value', () => {
    expect(minimalInstance(object({ a: { type: 'integer', minimum: 5, maximum: 1 } }))).toBe(UNSATISFIABLE);
    expect(minimalInstance({ ...object({ a: { $ref: '#/$defs/n' } }), $defs: { n: object({ next: { $ref: '#/$defs/n' } }) } })).toBe(UNSATISFIABLE);
  });

  it('fills a required property named like an Object method from additionalProperties', () => {
    expect(minimalInstance({ type: 'object', required: ['constructor'], additionalProperties: { type: 'integer' } })).toEqual({ constructor: 0 });
  });
});
