import { describe, expect, it } from 'vitest';
import { walkSchema } from './json-schema-walk.js';
import { createRequire } from 'node:module';
import { enumsProblem, toolSchemaProblem as problemWithNodes } from './tool-schema.js';

/** The meta-schema check as callers run it: on a schema already walked within the limits. */
function toolSchemaProblem(schema: Record<string, unknown>): string | null {
  const nodes = walkSchema(schema, 2_000, 32);
  if (typeof nodes === 'string') throw new Error(nodes);
  return problemWithNodes(schema, nodes);
}

const city = { city: { type: 'string', description: 'where' } };

describe('toolSchemaProblem accepts each JSON Schema draft', () => {
  it.each<[string, Record<string, unknown>]>([
    ['no $schema (draft-07)', { type: 'object', properties: city, required: ['city'] }],
    ['draft-04 with boolean exclusiveMinimum', { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object', properties: { n: { type: 'number', minimum: 0, exclusiveMinimum: true } } }],
    ['draft-06 with const', { $schema: 'http://json-schema.org/draft-06/schema#', type: 'object', properties: { unit: { const: 'c' } } }],
    ['draft-07 with if/then', { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', if: { required: ['a'] }, then: { required: ['b'] } }],
    ['2019-09 with $defs and $ref', { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object', $defs: { c: { type: 'string' } }, properties: { city: { $ref: '#/$defs/c' } } }],
    // What LangChain with zod v4 sends (z.toJSONSchema).
    ['2020-12 from zod v4', { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: city, required: ['city'], additionalProperties: false }],
    ['2020-12 with prefixItems', { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { p: { type: 'array', prefixItems: [{ type: 'number' }] } } }],
    ['the URI with https and no fragment', { $schema: 'https://json-schema.org/draft-07/schema', type: 'object' }],
  ])('%s', (_name, schema) => {
    expect(toolSchemaProblem(schema)).toBeNull();
  });
});

describe('toolSchemaProblem refuses', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['a 2020-12 schema with properties not an object', { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: 3 }, /parameters\/properties must be object/],
    ['a draft-04 schema with a numeric exclusiveMinimum', { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object', properties: { n: { type: 'number', exclusiveMinimum: 3 } } }, /not a valid JSON Schema \(http:\/\/json-schema\.org\/draft-04/],
    ['a draft-07 schema with an unknown type', { type: 'object', properties: { a: { type: 'text' } } }, /not a valid JSON Schema \(draft-07\)/],
    ['an unknown $schema', { $schema: 'https://example.com/my-schema', type: 'object' }, /is not a JSON Schema draft this service knows; supported: draft-04, draft-06, draft-07, 2019-09, 2020-12/],
    ['a $schema that is not a string', { $schema: 7, type: 'object' }, /\$schema must be a string/],
  ])('%s', (_name, schema, message) => {
    expect(toolSchemaProblem(schema)).toMatch(message);
  });
});

describe('enum values must be unique where the draft says so', () => {
  const duplicated = (extra: Record<string, unknown> = {}) => ({ type: 'object', properties: { a: { enum: [1, 2, 1] } }, ...extra });
  it.each<[string, Record<string, unknown>, RegExp | null]>([
    ['draft-07 (no $schema)', duplicated(), /^not a valid JSON Schema \(draft-07\): parameters\/properties\/a\/enum must NOT have duplicate items \(items ## 0 and 2 are identical\)$/],
    ['draft-04', duplicated({ $schema: 'http://json-schema.org/draft-04/schema#' }), /must NOT have duplicate items/],
    ['draft-06', duplicated({ $schema: 'http://json-schema.org/draft-06/schema#' }), /must NOT have duplicate items/],
    ['2019-09 (unique values are only recommended)', duplicated({ $schema: 'https://json-schema.org/draft/2019-09/schema' }), null],
    ['2020-12', duplicated({ $schema: 'https://json-schema.org/draft/2020-12/schema' }), null],
    ['draft-07, an enum under dependencies', { type: 'object', dependencies: { a: { properties: { b: { enum: ['x', 'x'] } } }, c: ['a'] } }, /parameters\/dependencies\/a\/properties\/b\/enum must NOT have duplicate items/],
    ['draft-07, an empty enum (the meta-schema still asks for one value)', { type: 'object', properties: { a: { enum: [] } } }, /must NOT have fewer than 1 items/],
  ])('%s', (_name, schema, message) => {
    const problem = toolSchemaProblem(schema);
    if (message === null) expect(problem).toBeNull();
    else expect(problem).toMatch(message);
  });

  it.each<[string, unknown[], string | null]>([
    ['distinct scalars of every type', [1, '1', true, null, 'true', [1], { a: 1 }], null],
    ['equal numbers', [0, 1, 1.0], '## 1 and 2'],
    ['equal objects with keys in another order', [{ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 }], '## 0 and 1'],
    ['arrays in another order are distinct', [[1, 2], [2, 1]], null],
  ])('enumsProblem: %s', (_name, values, found) => {
    const problem = enumsProblem([{ schema: { enum: values }, path: '', objectDepth: 0 }]);
    if (found === null) expect(problem).toBeNull();
    else expect(problem).toContain(found);
  });

  it('leaves the meta-schemas every other Ajv shares as they are', () => {
    const require = createRequire(import.meta.url);
    expect(require('ajv/dist/refs/json-schema-draft-07.json').properties.enum.uniqueItems).toBe(true);
    expect(require('ajv-draft-04/dist/refs/json-schema-draft-04.json').properties.enum.uniqueItems).toBe(true);
  });
});
