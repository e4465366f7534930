import { describe, expect, it } from 'vitest';
import { toolSchemaProblem } from './tool-schema.js';

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
