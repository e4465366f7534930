// Checks a tool's `parameters` against the meta-schema of the JSON Schema draft it
// declares. Clients send every draft: OpenAI's examples carry no `$schema` (draft-07
// here), LangChain with zod v4 declares 2020-12, older generators draft-04. Each draft
// gets its own Ajv; only the meta-schemas are compiled, never the client's schema.
import { createRequire } from 'node:module';
import { Ajv, type AnySchemaObject, type ErrorObject } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import AjvDraft04Module from 'ajv-draft-04';

const require = createRequire(import.meta.url);
const draft06MetaSchema = require('ajv/dist/refs/json-schema-draft-06.json') as AnySchemaObject;
// ajv-draft-04 is CommonJS with a default export; Node hands ESM the whole module object.
const AjvDraft04 = ((AjvDraft04Module as unknown as { default?: typeof AjvDraft04Module }).default ?? AjvDraft04Module);

interface MetaChecker {
  validateSchema(schema: AnySchemaObject): boolean | Promise<unknown>;
  errorsText(errors?: ErrorObject[] | null, options?: { dataVar?: string }): string;
  errors?: ErrorObject[] | null;
}

const options = { strict: false, validateSchema: true, logger: false } as const;
const draft06 = new Ajv(options);
draft06.addMetaSchema(draft06MetaSchema);

/** Meta-schema URI (scheme-less, without the empty fragment) -> the Ajv that knows it and its URI there. */
const CHECKERS: Record<string, { ajv: MetaChecker; uri: string }> = {
  'json-schema.org/draft-04/schema': { ajv: new AjvDraft04(options), uri: 'http://json-schema.org/draft-04/schema#' },
  'json-schema.org/draft-06/schema': { ajv: draft06, uri: 'http://json-schema.org/draft-06/schema#' },
  'json-schema.org/draft-07/schema': { ajv: new Ajv(options), uri: 'http://json-schema.org/draft-07/schema#' },
  'json-schema.org/draft/2019-09/schema': { ajv: new Ajv2019(options), uri: 'https://json-schema.org/draft/2019-09/schema' },
  'json-schema.org/draft/2020-12/schema': { ajv: new Ajv2020(options), uri: 'https://json-schema.org/draft/2020-12/schema' },
};
const DEFAULT_DRAFT = 'json-schema.org/draft-07/schema';

export const SUPPORTED_DRAFTS = ['draft-04', 'draft-06', 'draft-07', '2019-09', '2020-12'] as const;

/** `http://json-schema.org/draft-07/schema#` and `https://json-schema.org/draft-07/schema` name one draft. */
function draftKey(uri: string): string {
  return uri.trim().replace(/^https?:\/\//i, '').replace(/#$/, '').toLowerCase();
}

/**
 * Why `parameters` is not a valid JSON Schema of the draft it declares (no `$schema`:
 * draft-07), or null when it is. Never throws: every refusal is the client's mistake.
 */
export function toolSchemaProblem(parameters: Record<string, unknown>): string | null {
  const declared = parameters.$schema;
  if (declared !== undefined && typeof declared !== 'string') return '$schema must be a string (the URI of a JSON Schema draft)';
  const checker = CHECKERS[declared === undefined ? DEFAULT_DRAFT : draftKey(declared)];
  if (!checker) return `$schema ${JSON.stringify(declared)} is not a JSON Schema draft this service knows; supported: ${SUPPORTED_DRAFTS.join(', ')}`;
  // Ajv looks the meta-schema up by $schema; ours are registered under the canonical
  // URI, so the check runs on a copy carrying that URI.
  const canonical = { ...parameters, $schema: checker.uri };
  try {
    if (checker.ajv.validateSchema(canonical) === true) return null;
  } catch (err) {
    // A pathological schema (e.g. nested past the stack) is refused, not a 500.
    return `the schema cannot be checked: ${(err as Error).message}`;
  }
  return `not a valid JSON Schema (${declared === undefined ? 'draft-07' : declared}): ${checker.ajv.errorsText(checker.ajv.errors, { dataVar: 'parameters' })}`;
}

