import { describe, expect, it } from 'vitest';
import { ApiError } from '../../shared/src/errors.js';
import { grammarSchemaFor, patchGrammar } from './json-grammar.js';

const closed = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false, ...extra });

function paramOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err.param;
    throw err;
  }
  throw new Error('expected an ApiError');
}

describe('grammarSchemaFor', () => {
  it('translates a schema into self-contained defs: type lists become alternatives, anyOf becomes oneOf, # and $defs refs resolve', () => {
    const schema = closed({ name: { type: ['string', 'null'], maxLength: 5 }, kids: { type: 'array', items: { $ref: '#' } }, unit: { anyOf: [{ $ref: '#/$defs/unit' }, { type: 'null' }] } }, { $defs: { unit: { enum: ['c', 'f'] } } });
    expect(grammarSchemaFor({ kind: 'json_schema', schema })).toEqual({
      oneOf: [{ $ref: '#/$defs/root' }],
      $defs: {
        root: {
          type: 'object',
          required: ['name', 'kids', 'unit'],
          properties: {
            name: { oneOf: [{ type: 'string', maxLength: 5 }, { type: 'null' }] },
            kids: { type: 'array', items: { $ref: '#/$defs/root' } },
            unit: { oneOf: [{ $ref: '#/$defs/d_unit' }, { type: 'null' }] },
          },
        },
        d_unit: { enum: ['c', 'f'] },
      },
    });
  });

  it('a forced tool call is one object per allowed tool: its name as a constant, its parameters as arguments', () => {
    const tools = [{ name: 'a', parameters: closed({ x: { type: 'boolean' } }) }, { name: 'b', parameters: { type: 'object', properties: {} } }];
    const grammar = grammarSchemaFor({ kind: 'tool_call', tools }) as unknown as { oneOf: Array<{ properties: { name: unknown; arguments: unknown } }>; $defs: Record<string, unknown> };
    expect(grammar.oneOf.map((o) => o.properties)).toEqual([
      { name: { const: 'a' }, arguments: { $ref: '#/$defs/t0_root' } },
      { name: { const: 'b' }, arguments: { $ref: '#/$defs/t1_root' } },
    ]);
    expect(grammar.$defs.t1_root).toEqual({ type: 'object', properties: {}, required: [], additionalProperties: true });
  });

  it.each<[Record<string, unknown>, string]>([
    [closed({ a: { type: 'string', pattern: 'x' } }), 'response_format.json_schema.schema.properties.a.pattern'],
    [closed({ a: { type: 'number', minimum: 0 } }), 'response_format.json_schema.schema.properties.a.minimum'],
    [closed({ a: { type: 'string', format: 'email' } }), 'response_format.json_schema.schema.properties.a.format'],
    [closed({ a: { $ref: '#/$defs/missing' } }), 'response_format.json_schema.schema.properties.a.$ref'],
    [closed({ a: { allOf: [] } }), 'response_format.json_schema.schema.properties.a.allOf'],
  ])('refuses what a grammar cannot enforce, naming it: %j', (schema, param) => {
    expect(paramOf(() => grammarSchemaFor({ kind: 'json_schema', schema }))).toBe(param);
  });

  it('accepts integer bounds that its 15-digit integers never leave (zod sends the safe-integer range)', () => {
    expect(() => grammarSchemaFor({ kind: 'json_schema', schema: closed({ n: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 } }) })).not.toThrow();
  });
});

describe('patchGrammar', () => {
  it('bounds number digits, drops exponents and the trailing newline run', () => {
    const gbnf = [
      'root ::= "{" ws "}" "\\n\\n\\n\\n" [\\n]*',
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
      'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    ].join('\n');
    expect(patchGrammar(gbnf).split('\n')).toEqual([
      'root ::= "{" ws "}"',
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})',
      'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14}) ("." [0-9]{1,15})?',
    ]);
  });
});
