// Checks a tool's `parameters` against the meta-schema of the JSON Schema draft it
// declares. Clients send every draft: OpenAI's examples carry no `$schema` (draft-07
// here), LangChain with zod v4 declares 2020-12, older generators draft-04. Each draft
// gets its own Ajv; only the meta-schemas are compiled, never the client's schema.
//
// Draft-04, 06 and 07 declare `enum` with `uniqueItems`, which Ajv checks by comparing
// every pair of values: a 160,000-value enum blocked the event loop for 15 seconds. Those
// meta-schemas are used here without that one constraint, and enumsProblem checks it in
// linear time instead, so the verdict is the draft's own.
import { createRequire } from 'node:module';
import { Ajv, type AnySchemaObject, type ErrorObject } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import AjvDraft04Module from 'ajv-draft-04';
import { canonicalJson } from '../pipeline/canonical-json.js';
import type { SchemaNode } from './json-schema-walk.js';

const require = createRequire(import.meta.url);
const draft04MetaSchema = require('ajv-draft-04/dist/refs/json-schema-draft-04.json') as AnySchemaObject;
const draft06MetaSchema = require('ajv/dist/refs/json-schema-draft-06.json') as AnySchemaObject;
const draft07MetaSchema = require('ajv/dist/refs/json-schema-draft-07.json') as AnySchemaObject;
// ajv-draft-04 is CommonJS with a default export; Node hands ESM the whole module object.
const AjvDraft04 = ((AjvDraft04Module as unknown as { default?: typeof AjvDraft04Module }).default ?? AjvDraft04Module);

interface MetaChecker {
  validateSchema(schema: AnySchemaObject): boolean | Promise<unknown>;
  errorsText(errors?: ErrorObject[] | null, options?: { dataVar?: string }): string;
  errors?: ErrorObject[] | null;
}

const options = { strict: false, validateSchema: true, logger: false } as const;

/** A copy of a draft's meta-schema whose `enum` drops `uniqueItems` (the required JSON is shared: not edited in place). */
export function withoutEnumUniqueness(meta: AnySchemaObject): AnySchemaObject {
  const { uniqueItems: _unique, ...enumRule } = meta.properties.enum as Record<string, unknown>;
  return { ...meta, properties: { ...meta.properties, enum: enumRule } };
}

/** An Ajv that knows only `meta` (with enum uniqueness left to enumsProblem), under `uri`. */
function checkerOf(ajv: Ajv | InstanceType<typeof AjvDraft04>, meta: AnySchemaObject, uri: string): MetaChecker {
  // Not checked against itself: the copy is the draft's own meta-schema less one keyword.
  ajv.addMetaSchema(withoutEnumUniqueness(meta), uri, false);
  return ajv;
}

const noMeta = { ...options, meta: false } as const;

/** Meta-schema URI (scheme-less, without the empty fragment) -> the Ajv that knows it, its URI there, and whether enums must be unique. */
const CHECKERS: Record<string, { ajv: MetaChecker; uri: string; uniqueEnums: boolean }> = {
  'json-schema.org/draft-04/schema': { ajv: checkerOf(new AjvDraft04(noMeta), draft04MetaSchema, 'http://json-schema.org/draft-04/schema'), uri: 'http://json-schema.org/draft-04/schema#', uniqueEnums: true },
  'json-schema.org/draft-06/schema': { ajv: checkerOf(new Ajv(noMeta), draft06MetaSchema, 'http://json-schema.org/draft-06/schema'), uri: 'http://json-schema.org/draft-06/schema#', uniqueEnums: true },
  'json-schema.org/draft-07/schema': { ajv: checkerOf(new Ajv(noMeta), draft07MetaSchema, 'http://json-schema.org/draft-07/schema'), uri: 'http://json-schema.org/draft-07/schema#', uniqueEnums: true },
  // Their meta-schemas ask for no unique enum values (only that they SHOULD be).
  'json-schema.org/draft/2019-09/schema': { ajv: new Ajv2019(options), uri: 'https://json-schema.org/draft/2019-09/schema', uniqueEnums: false },
  'json-schema.org/draft/2020-12/schema': { ajv: new Ajv2020(options), uri: 'https://json-schema.org/draft/2020-12/schema', uniqueEnums: false },
};
const DEFAULT_DRAFT = 'json-schema.org/draft-07/schema';

export const SUPPORTED_DRAFTS = ['draft-04', 'draft-06', 'draft-07', '2019-09', '2020-12'] as const;

/** `http://json-schema.org/draft-07/schema#` and `https://json-schema.org/draft-07/schema` name one draft. */
function draftKey(uri: string): string {
  return uri.trim().replace(/^https?:\/\//i, '').replace(/#$/, '').toLowerCase();
}

/**
 * The first enum (of `nodes`, the walked schema) holding a value twice, as Ajv's
 * uniqueItems would word it; one pass over each enum with a Set of canonical JSON (equal
 * objects in any key order are one value, as for Ajv).
 */
export function enumsProblem(nodes: readonly SchemaNode[]): string | null {
  for (const { schema, path } of nodes) {
    if (!Array.isArray(schema.enum)) continue;
    const seen = new Map<string, number>();
    for (const [i, value] of schema.enum.entries()) {
      const key = canonicalJson(value);
      const earlier = seen.get(key);
      if (earlier !== undefined) return `parameters/${path === '' ? '' : `${path.replace(/\./g, '/')}/`}enum must NOT have duplicate items (items ## ${earlier} and ${i} are identical)`;
      seen.set(key, i);
    }
  }
  return null;
}

/**
 * Why `parameters` is not a valid JSON Schema of the draft it declares (no `$schema`:
 * draft-07), or null when it is. `nodes` is the schema as walkSchema walked it, within
 * the size limits (the caller's check). Never throws: every refusal is the client's mistake.
 */
export function toolSchemaProblem(parameters: Record<string, unknown>, nodes: readonly SchemaNode[]): string | null {
  const declared = parameters.$schema;
  if (declared !== undefined && typeof declared !== 'string') return '$schema must be a string (the URI of a JSON Schema draft)';
  const checker = CHECKERS[declared === undefined ? DEFAULT_DRAFT : draftKey(declared)];
  if (!checker) return `$schema ${JSON.stringify(declared)} is not a JSON Schema draft this service knows; supported: ${SUPPORTED_DRAFTS.join(', ')}`;
  // Ajv looks the meta-schema up by $schema; ours are registered under the canonical
  // URI, so the check runs on a copy carrying that URI.
  const canonical = { ...parameters, $schema: checker.uri };
  const draft = declared === undefined ? 'draft-07' : declared;
  try {
    if (checker.ajv.validateSchema(canonical) !== true) return `not a valid JSON Schema (${draft}): ${checker.ajv.errorsText(checker.ajv.errors, { dataVar: 'parameters' })}`;
  } catch (err) {
    // A pathological schema (e.g. nested past the stack) is refused, not a 500.
    return `the schema cannot be checked: ${(err as Error).message}`;
  }
  const duplicate = checker.uniqueEnums ? enumsProblem(nodes) : null;
  return duplicate && `not a valid JSON Schema (${draft}): ${duplicate}`;
}

