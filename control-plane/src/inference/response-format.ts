// `response_format` on chat completions: its request schema and every check a schema
// cannot say. A json_schema is checked before any engine sees it: a valid JSON Schema of
// its declared draft, small enough that compiling it into a grammar stays cheap (bounded
// size, subschemas, nesting, enum values), patterns that are regular expressions,
// references only local and resolvable, a finite value exists (no $ref cycle without a way
// out), and with `strict: true` within OpenAI's documented strict-mode subset, so a schema
// OpenAI refuses is refused here as well.
import { createHash } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import { toolSchemaProblem } from './tool-schema.js';
import type { SchemaMeter } from './schema-budget.js';
import { isObjectSchema, isRecord, resolveLocalRef, walkSchema, type SchemaNode } from './json-schema-walk.js';
import { MAX_INSTANCE_CHARS, minimalInstance, TOO_LARGE, UNSATISFIABLE } from './schema-instance.js';

/** Serialized size of one schema; a 1 MB schema is refused before anything walks it. */
export const MAX_SCHEMA_BYTES = 64 * 1024;
/**
 * All tools' parameters of one request together: checking them costs the event loop about
 * 4 ms per 50 KB, so 128 tools each at MAX_SCHEMA_BYTES had held it for half a second per
 * request. About 40 ms at most now; a hundred ordinary tools take a fraction of it.
 */
export const MAX_TOOLS_SCHEMA_BYTES = 512 * 1024;
/** Subschemas in one schema; bounds grammar size and compilation time. */
export const MAX_SCHEMA_NODES = 2_000;
/** Document nesting (any keyword); object nesting has OpenAI's tighter bound below. */
export const MAX_SCHEMA_NESTING = 32;
/** OpenAI's documented limits for structured outputs, applied to every json_schema. */
export const MAX_OBJECT_NESTING = 10;
export const MAX_PROPERTIES = 5_000;
export const MAX_ENUM_VALUES = 1_000;
export const MAX_SCHEMA_STRING_CHARS = 120_000;
/** A string enum longer than this many values must stay under MAX_LARGE_ENUM_CHARS in all. */
const LARGE_ENUM = 250;
const MAX_LARGE_ENUM_CHARS = 15_000;

const SchemaName = Type.String({ pattern: '^[a-zA-Z0-9_-]{1,64}$', description: 'a-z, A-Z, 0-9, _ and -, at most 64.' });

export const ResponseFormat = Type.Union(
  [
    Type.Object({ type: Type.Literal('text') }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('json_object') }, { additionalProperties: false }),
    Type.Object(
      {
        type: Type.Literal('json_schema'),
        json_schema: Type.Object(
          {
            name: SchemaName,
            description: Type.Optional(Type.String({ maxLength: 4096 })),
            schema: Type.Record(Type.String(), Type.Unknown(), { description: 'A JSON Schema of an object; see docs/inference.md for the limits.' }),
            strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
          },
          { additionalProperties: false },
        ),
      },
      { additionalProperties: false },
    ),
  ],
  { description: 'text (default), json_object (any JSON object) or json_schema (output valid against the schema).' },
);
export type ResponseFormat = Static<typeof ResponseFormat>;

export interface Problem {
  param: string;
  message: string;
}

const SCHEMA_PARAM = 'response_format.json_schema.schema';
/** Names a keyword's path inside the schema given at `param`. */
type Namer = (path: string) => string;
const under = (param: string): Namer => (path) => (path === '' ? param : `${param}.${path}`);
const at = under(SCHEMA_PARAM);

/** Keywords OpenAI's strict mode accepts (plus annotations); anything else is refused with strict: true. */
const STRICT_KEYWORDS = new Set([
  'type', 'enum', 'const', 'anyOf', '$ref', '$defs', 'definitions',
  'properties', 'required', 'additionalProperties',
  'items', 'minItems', 'maxItems',
  'pattern', 'format', 'minLength', 'maxLength',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'title', 'description', '$schema', '$comment', 'examples', 'default',
]);
/** The string formats OpenAI's strict mode documents. */
export const STRICT_FORMATS = ['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid'];

/**
 * Verdicts on recently seen schemas (response formats and tools' parameters): clients send
 * the same schemas on every call, and checking a large one costs milliseconds of the
 * control plane's CPU each time.
 */
const VERDICT_CACHE_SIZE = 256;
const verdicts = new Map<string, Problem | null>();

/** What is wrong with a response_format, naming the field; undefined when it is fine. */
export function responseFormatProblem(format: ResponseFormat, meter?: SchemaMeter): Problem | undefined {
  if (format.type !== 'json_schema') return undefined;
  const { schema, strict } = format.json_schema;
  const text = JSON.stringify(schema);
  const size = Buffer.byteLength(text);
  if (size > MAX_SCHEMA_BYTES) return { param: SCHEMA_PARAM, message: `the schema is ${size} bytes; at most ${MAX_SCHEMA_BYTES} are accepted` };
  const key = createHash('sha256').update(strict === true ? 'strict\n' : 'loose\n').update(text).digest('base64');
  const known = verdicts.get(key);
  if (known !== undefined) return known ?? undefined;
  meter?.(size);
  const verdict = schemaProblem(schema, strict === true);
  remember(key, verdict ?? null);
  return verdict;
}

/** Keeps a verdict, the oldest going past VERDICT_CACHE_SIZE. */
function remember(key: string, verdict: Problem | null): void {
  verdicts.set(key, verdict);
  if (verdicts.size > VERDICT_CACHE_SIZE) verdicts.delete(verdicts.keys().next().value!);
}

/**
 * The same checks for another schema an engine compiles into a grammar: the parameters of
 * a tool a call is forced to (tool_choice "required" or a named function), its problems
 * named at `param`. Unchecked, a schema the engine cannot compile (a $ref cycle through
 * required properties) failed on every replica it was tried on, and each failure ejected
 * one: a single request took a model out of service for everyone.
 */
export function compiledSchemaProblem(schema: Record<string, unknown>, param: string, meter?: SchemaMeter): Problem | undefined {
  const problem = responseFormatProblem({ type: 'json_schema', json_schema: { name: 'parameters', schema, strict: false } }, meter);
  return problem && { param: param + problem.param.slice(SCHEMA_PARAM.length), message: problem.message };
}

/**
 * The checks every tool's `parameters` get, forced or not, named at `param`
 * (`tools[i].function.parameters`): the size limits first, then the draft's meta-schema.
 * Ajv's meta-schema check is quadratic in an enum's length (it compares every pair of
 * values), so unbounded it let one 1 MB tool block the event loop for 46 seconds.
 */
export function toolParametersProblem(parameters: Record<string, unknown>, param: string, text = JSON.stringify(parameters), meter?: SchemaMeter): Problem | undefined {
  const size = Buffer.byteLength(text);
  if (size > MAX_SCHEMA_BYTES) return { param, message: `function parameters are ${size} bytes; at most ${MAX_SCHEMA_BYTES} are accepted` };
  // Agents send the same tools with every turn: a schema checked once is not checked again
  // (the verdict is kept with its field path relative to the tool's parameters).
  const key = createHash('sha256').update('tool\n').update(text).digest('base64');
  const known = verdicts.get(key);
  if (known !== undefined) return known ? { param: param + known.param, message: known.message } : undefined;
  meter?.(size);
  const verdict = uncachedToolParametersProblem(parameters, param);
  remember(key, verdict ? { param: verdict.param.slice(param.length), message: verdict.message } : null);
  return verdict;
}

function uncachedToolParametersProblem(parameters: Record<string, unknown>, param: string): Problem | undefined {
  const walked = walkSchema(parameters, MAX_SCHEMA_NODES, MAX_SCHEMA_NESTING);
  if (typeof walked === 'string') return { param, message: `function parameters are refused: ${walked}` };
  const limits = limitsProblem(walked, under(param));
  if (limits) return limits;
  const meta = toolSchemaProblem(parameters, walked);
  if (meta) return { param, message: `function parameters are ${meta.startsWith('not ') ? '' : 'refused: '}${meta}` };
  return undefined;
}

function schemaProblem(schema: Record<string, unknown>, strict: boolean): Problem | undefined {
  const walked = walkSchema(schema, MAX_SCHEMA_NODES, MAX_SCHEMA_NESTING);
  if (typeof walked === 'string') return { param: SCHEMA_PARAM, message: walked };
  if (schema.type !== 'object') return { param: at('type'), message: 'the schema must describe an object: give "type": "object" at its root' };
  const limits = limitsProblem(walked, at);
  if (limits) return limits;
  const refs = refsProblem(schema, walked);
  if (refs) return refs;
  const meta = toolSchemaProblem(schema, walked);
  if (meta) return { param: SCHEMA_PARAM, message: meta.startsWith('not ') ? `the schema is ${meta}` : meta };
  if (strict) {
    const strictness = strictProblem(walked);
    if (strictness) return strictness;
  }
  const pattern = patternProblem(walked);
  if (pattern) return pattern;
  const instance = minimalInstance(schema);
  if (instance === UNSATISFIABLE) {
    return { param: SCHEMA_PARAM, message: 'no finite JSON value satisfies the schema (a $ref cycle through required properties, or contradictory bounds)' };
  }
  if (instance === TOO_LARGE) {
    return {
      param: SCHEMA_PARAM,
      message: `no JSON value of at most ${MAX_INSTANCE_CHARS} characters satisfies the schema: lower minItems or minLength, or shorten the const and enum values it requires`,
    };
  }
  return undefined;
}

function limitsProblem(nodes: SchemaNode[], at: Namer): Problem | undefined {
  const root = at('');
  let properties = 0;
  let enumValues = 0;
  let chars = 0;
  for (const { schema, path, objectDepth } of nodes) {
    if (objectDepth > MAX_OBJECT_NESTING) return { param: at(path), message: `objects nest deeper than ${MAX_OBJECT_NESTING} levels` };
    if (isRecord(schema.properties)) {
      const names = Object.keys(schema.properties);
      properties += names.length;
      chars += names.reduce((n, k) => n + k.length, 0);
    }
    for (const key of ['$defs', 'definitions'] as const) if (isRecord(schema[key])) chars += Object.keys(schema[key]).reduce((n, k) => n + k.length, 0);
    const values = Array.isArray(schema.enum) ? schema.enum : [];
    enumValues += values.length;
    const enumChars = values.reduce<number>((n, v) => n + (typeof v === 'string' ? v.length : 0), 0);
    if (values.length > LARGE_ENUM && enumChars > MAX_LARGE_ENUM_CHARS) {
      return { param: at(`${path === '' ? '' : `${path}.`}enum`), message: `an enum of more than ${LARGE_ENUM} values may hold at most ${MAX_LARGE_ENUM_CHARS} characters in all` };
    }
    chars += enumChars + (typeof schema.const === 'string' ? schema.const.length : 0);
  }
  if (properties > MAX_PROPERTIES) return { param: root, message: `the schema has ${properties} object properties; at most ${MAX_PROPERTIES}` };
  if (enumValues > MAX_ENUM_VALUES) return { param: root, message: `the schema has ${enumValues} enum values; at most ${MAX_ENUM_VALUES}` };
  if (chars > MAX_SCHEMA_STRING_CHARS) return { param: root, message: `property names, definition names, enum and const values total ${chars} characters; at most ${MAX_SCHEMA_STRING_CHARS}` };
  return undefined;
}

/**
 * Every `pattern` (and patternProperties key) must be a regular expression. With the
 * meta-schema and the reference checks this is what compiling the schema would check;
 * Ajv's compilation itself is not run: it took over a second of the control plane's CPU
 * for a schema at the size limit, which a tenant could repeat with a new schema per request.
 */
function patternProblem(nodes: SchemaNode[]): Problem | undefined {
  for (const { schema, path } of nodes) {
    const patterns: Array<[string, unknown]> = [[path === '' ? 'pattern' : `${path}.pattern`, schema.pattern]];
    if (isRecord(schema.patternProperties)) for (const key of Object.keys(schema.patternProperties)) patterns.push([path === '' ? 'patternProperties' : `${path}.patternProperties`, key]);
    for (const [where, source] of patterns) {
      if (typeof source !== 'string') continue;
      try {
        new RegExp(source, 'u');
      } catch (err) {
        return { param: at(where), message: `not a regular expression: ${(err as Error).message}` };
      }
    }
  }
  return undefined;
}

/**
 * References must be local and resolve, and following $ref alone must never come back to
 * where it started (`{"$ref":"#/$defs/a"}` defined as itself has no meaning and sends a
 * grammar compiler into a loop). Recursion through properties or items is fine.
 */
function refsProblem(root: Record<string, unknown>, nodes: SchemaNode[]): Problem | undefined {
  for (const { schema, path } of nodes) {
    if ('$id' in schema) return { param: at(path), message: '$id is not supported: references must be local (#, #/$defs/<name>, #/definitions/<name>)' };
    if (schema.$ref === undefined) continue;
    if (typeof schema.$ref !== 'string' || resolveLocalRef(root, schema.$ref) === undefined) {
      return { param: at(path), message: `$ref ${JSON.stringify(schema.$ref)} points nowhere: only #, #/$defs/<name> and #/definitions/<name> of this schema` };
    }
    const seen = new Set<Record<string, unknown>>([schema]);
    let target: Record<string, unknown> | undefined = schema;
    while (target !== undefined && typeof target.$ref === 'string') {
      target = resolveLocalRef(root, target.$ref);
      if (target === undefined) break;
      if (seen.has(target)) return { param: at(path), message: `$ref ${schema.$ref} refers to itself through references alone` };
      seen.add(target);
    }
  }
  return undefined;
}

/** OpenAI's strict-mode subset: every object closed and fully required, documented keywords only. */
function strictProblem(nodes: SchemaNode[]): Problem | undefined {
  for (const { schema, path } of nodes) {
    for (const key of Object.keys(schema)) {
      if (!STRICT_KEYWORDS.has(key)) {
        return { param: at(path === '' ? key : `${path}.${key}`), message: `${key} is not supported with strict: true (OpenAI's strict-mode subset); drop it or send strict: false` };
      }
    }
    if (typeof schema.format === 'string' && !STRICT_FORMATS.includes(schema.format)) {
      return { param: at(path === '' ? 'format' : `${path}.format`), message: `format ${schema.format} is not supported with strict: true; one of ${STRICT_FORMATS.join(', ')}` };
    }
    if (path === '' && schema.anyOf !== undefined) return { param: at('anyOf'), message: 'the root of a strict schema may not be anyOf' };
    if (!isObjectSchema(schema)) continue;
    if (schema.additionalProperties !== false) {
      return { param: at(path === '' ? 'additionalProperties' : `${path}.additionalProperties`), message: 'with strict: true every object needs "additionalProperties": false' };
    }
    const names = Object.keys(isRecord(schema.properties) ? schema.properties : {});
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const missing = names.filter((n) => !required.has(n));
    if (missing.length > 0) {
      return {
        param: at(path === '' ? 'required' : `${path}.required`),
        message: `with strict: true every property must be required; missing ${missing.join(', ')} (make a property optional with a union with null)`,
      };
    }
  }
  return undefined;
}
