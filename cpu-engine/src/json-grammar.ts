// Structured output for llama.cpp: turns a request's JSON Schema (response_format, or the
// tools a forced tool call may use) into the schema dialect node-llama-cpp compiles into a
// GBNF grammar, so every sampled token keeps the output valid. Only what a grammar can
// enforce is accepted; any other keyword is a 400 naming it (the control plane refuses the
// same keywords first, see engine-features.ts there). Pure: the native grammar is made in
// llama-engine.ts.
import { ApiError } from '../../shared/src/errors.js';
import type { GbnfJsonSchema } from 'node-llama-cpp';
import { grammarAmbiguityProblem, MAX_GRAMMAR_AMBIGUITY } from '../../shared/src/grammar-ambiguity.js';

/** What generation is constrained to. */
export type Constraint =
  | { kind: 'none' }
  | { kind: 'json_object' }
  | { kind: 'json_schema'; schema: Record<string, unknown> }
  /** One call of one of `tools`: the output is `{"name": ..., "arguments": {...}}`. */
  | { kind: 'tool_call'; tools: Array<{ name: string; parameters: Record<string, unknown> }> };

/** Integers and numbers the grammar writes have at most this many integer digits (below 2^53). */
export const MAX_INTEGER_DIGITS = 15;
const FORMATS = ['date-time', 'date', 'time'];
const ANNOTATIONS = new Set(['title', 'description', '$schema', '$comment', 'examples', 'default']);
/** Bounds the translation itself: a schema larger than this is refused before any grammar is built. */
const MAX_NODES = 4_000;

type Out = Record<string, unknown>;

function refuse(param: string, what: string): never {
  throw new ApiError('invalid_request', `this engine cannot enforce ${what} in a schema`, { param });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Translates `schema` (its root and its own $defs) into node-llama-cpp's dialect; every
 * definition lands in `defs` under `${prefix}<name>` so several schemas can share one grammar.
 */
class Translator {
  private nodes = 0;
  private readonly defs: Record<string, Out> = {};

  constructor(private readonly param: string) {}

  get definitions(): Record<string, Out> {
    return this.defs;
  }

  /** The root of `root` as a def named `${prefix}root`, and a reference to it. */
  translateRoot(root: Record<string, unknown>, prefix: string): Out {
    this.define(root, root, prefix, 'root', '');
    return { $ref: `#/$defs/${prefix}root` };
  }

  private define(root: Record<string, unknown>, schema: Record<string, unknown>, prefix: string, name: string, path: string): void {
    const key = `${prefix}${name}`;
    if (key in this.defs) return;
    this.defs[key] = {}; // placeholder: recursion refers to it before it is filled
    this.defs[key] = this.translate(root, schema, prefix, path);
  }

  private translate(root: Record<string, unknown>, s: Record<string, unknown>, prefix: string, path: string): Out {
    if (++this.nodes > MAX_NODES) refuse(this.param, `more than ${MAX_NODES} subschemas`);
    const at = (k: string) => (path === '' ? `${this.param}.${k}` : `${this.param}.${path}.${k}`);
    const sub = (k: string) => (path === '' ? k : `${path}.${k}`);
    const known = new Set(['type', 'enum', 'const', 'anyOf', '$ref', '$defs', 'definitions', 'properties', 'required', 'additionalProperties',
      'items', 'prefixItems', 'minItems', 'maxItems', 'minLength', 'maxLength', 'format', 'minimum', 'maximum']);
    for (const k of Object.keys(s)) if (!known.has(k) && !ANNOTATIONS.has(k)) refuse(at(k), k);

    if (typeof s.$ref === 'string') return { $ref: `#/$defs/${this.refName(root, s.$ref, prefix, at('$ref'))}` };
    for (const k of ['enum', 'const'] as const) {
      const values = k === 'enum' ? s.enum : 'const' in s ? [s.const] : undefined;
      if (values === undefined) continue;
      if (!Array.isArray(values) || values.some((v) => isRecord(v) || Array.isArray(v))) refuse(at(k), `${k} values that are objects or arrays`);
      return k === 'enum' ? { enum: values } : { const: s.const };
    }
    if (Array.isArray(s.anyOf)) return { oneOf: s.anyOf.map((alt, i) => this.translate(root, record(alt, at(`anyOf.${i}`)), prefix, sub(`anyOf.${i}`))) };

    const types = Array.isArray(s.type) ? (s.type as unknown[]) : s.type === undefined ? (isRecord(s.properties) ? ['object'] : undefined) : [s.type];
    if (types === undefined) refuse(at('type'), 'a schema without a type');
    // node-llama-cpp takes a list of types only for scalars: one alternative per type instead.
    const alternatives = types.map((t) => this.ofType(root, s, t, prefix, path));
    return alternatives.length === 1 ? alternatives[0]! : { oneOf: alternatives };
  }

  private ofType(root: Record<string, unknown>, s: Record<string, unknown>, type: unknown, prefix: string, path: string): Out {
    const at = (k: string) => (path === '' ? `${this.param}.${k}` : `${this.param}.${path}.${k}`);
    const sub = (k: string) => (path === '' ? k : `${path}.${k}`);
    switch (type) {
      case 'null':
      case 'boolean':
        return { type };
      case 'integer':
      case 'number': {
        const limit = 10 ** MAX_INTEGER_DIGITS - 1;
        const wide = type === 'integer' && (s.minimum === undefined || (s.minimum as number) <= -limit) && (s.maximum === undefined || (s.maximum as number) >= limit);
        if ((s.minimum !== undefined || s.maximum !== undefined) && !wide) refuse(at(s.minimum !== undefined ? 'minimum' : 'maximum'), 'numeric bounds');
        return { type };
      }
      case 'string': {
        if (s.format !== undefined) {
          if (!FORMATS.includes(s.format as string)) refuse(at('format'), `format ${String(s.format)}`);
          return { type: 'string', format: s.format };
        }
        return { type: 'string', ...pick(s, ['minLength', 'maxLength']) };
      }
      case 'array': {
        const out: Out = { type: 'array', ...pick(s, ['minItems', 'maxItems']) };
        if (Array.isArray(s.prefixItems)) out.prefixItems = s.prefixItems.map((item, i) => this.translate(root, record(item, at(`prefixItems.${i}`)), prefix, sub(`prefixItems.${i}`)));
        if (isRecord(s.items)) out.items = this.translate(root, s.items, prefix, sub('items'));
        else if (s.items !== undefined && s.items !== true) refuse(at('items'), 'items other than one schema');
        return out;
      }
      case 'object': {
        const properties = isRecord(s.properties) ? s.properties : {};
        const out: Out = {
          type: 'object',
          properties: Object.fromEntries(Object.entries(properties).map(([name, p]) => [name, this.translate(root, record(p, at(`properties.${name}`)), prefix, sub(`properties.${name}`))])),
          // The grammar writes every listed property, which satisfies any `required`.
          required: Object.keys(properties),
        };
        const extra = s.additionalProperties;
        // Without listed properties an open object takes any members; with them, the grammar
        // writes exactly those (valid whether or not more would be allowed).
        if (Object.keys(properties).length === 0 && extra !== false) {
          out.additionalProperties = isRecord(extra) ? this.translate(root, extra, prefix, sub('additionalProperties')) : true;
        } else if (isRecord(extra) && Object.keys(properties).length === 0) {
          out.additionalProperties = this.translate(root, extra, prefix, sub('additionalProperties'));
        }
        return out;
      }
      default:
        return refuse(at('type'), `type ${JSON.stringify(type)}`);
    }
  }

  /** The def name a local $ref resolves to (translating its target once). */
  private refName(root: Record<string, unknown>, ref: string, prefix: string, param: string): string {
    if (ref === '#') return `${prefix}root`;
    const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
    const defs = match ? root[match[1]!] : undefined;
    const name = match ? decodeURIComponent(match[2]!).replace(/~1/g, '/').replace(/~0/g, '~') : '';
    const target = isRecord(defs) ? defs[name] : undefined;
    if (!isRecord(target)) throw new ApiError('invalid_request', `$ref ${ref} points nowhere in this schema`, { param });
    const defName = `${match![1] === '$defs' ? 'd' : 'D'}_${name.replace(/[^a-zA-Z0-9]/g, (c) => `x${c.charCodeAt(0).toString(16)}`)}`;
    this.define(root, target, prefix, defName, `${match![1]}.${name}`);
    return `${prefix}${defName}`;
  }
}

function record(value: unknown, param: string): Record<string, unknown> {
  if (!isRecord(value)) refuse(param, 'a subschema that is not an object');
  return value;
}

function pick(s: Record<string, unknown>, keys: string[]): Out {
  return Object.fromEntries(keys.filter((k) => typeof s[k] === 'number').map((k) => [k, s[k]]));
}

/**
 * Refuses a schema whose nested unions llama.cpp's grammar sampler would follow in more than
 * `max` parses at once (see grammar-ambiguity.ts): one token of such a grammar took minutes,
 * and every sequence of the context waited for it. Checked before anything is compiled.
 */
function refuseAmbiguous(schema: Record<string, unknown>, param: string, max: number): void {
  const problem = grammarAmbiguityProblem(schema, max);
  if (problem) throw new ApiError('invalid_request', problem.message, { param: `${param}.${problem.path}` });
}

/**
 * The grammar schema for a constraint (undefined for none), self-contained with its $defs.
 * Throws a 400 for a keyword no grammar can enforce, or for a schema more ambiguous than
 * `maxAmbiguity` parses (each tool's parameters on their own: tools part on their names).
 */
export function grammarSchemaFor(constraint: Constraint, maxAmbiguity: number = MAX_GRAMMAR_AMBIGUITY): GbnfJsonSchema | undefined {
  switch (constraint.kind) {
    case 'none':
      return undefined;
    case 'json_object':
      return { type: 'object', additionalProperties: true } as GbnfJsonSchema;
    case 'json_schema': {
      const t = new Translator('response_format.json_schema.schema');
      const root = t.translateRoot(constraint.schema, '');
      // After the translation, which bounds the schema's size.
      refuseAmbiguous(constraint.schema, 'response_format.json_schema.schema', maxAmbiguity);
      return { oneOf: [root], $defs: t.definitions } as unknown as GbnfJsonSchema;
    }
    case 'tool_call': {
      const alternatives: Out[] = [];
      const defs: Record<string, Out> = {};
      constraint.tools.forEach((tool, i) => {
        const t = new Translator(`tools[${i}].function.parameters`);
        const args = t.translateRoot(tool.parameters, `t${i}_`);
        Object.assign(defs, t.definitions);
        alternatives.push({ type: 'object', properties: { name: { const: tool.name }, arguments: args }, required: ['name', 'arguments'] });
      });
      constraint.tools.forEach((tool, i) => refuseAmbiguous(tool.parameters, `tools[${i}].function.parameters`, maxAmbiguity));
      return { oneOf: alternatives, $defs: defs } as unknown as GbnfJsonSchema;
    }
  }
}

/**
 * Adjusts node-llama-cpp's GBNF: numbers without exponents and with at most
 * MAX_INTEGER_DIGITS integer digits (so every integer is exact in JavaScript and `1e999`
 * cannot parse to Infinity), and no required run of newlines after the value (its
 * chat-session stop trigger; here the grammar simply ends, leaving only end-of-sequence).
 */
export function patchGrammar(gbnf: string): string {
  const digits = `("0" | [1-9] [0-9]{0,${MAX_INTEGER_DIGITS - 1}})`;
  return gbnf
    .split('\n')
    .map((line) => {
      if (line.startsWith('integer-number-rule ::=')) return `integer-number-rule ::= "-"? ${digits}`;
      if (line.startsWith('fractional-number-rule ::=')) return `fractional-number-rule ::= "-"? ${digits} ("." [0-9]{1,15})?`;
      if (line.startsWith('root ::=')) return line.replace(/ "(\\n){4}" \[\\n\]\*$/, '');
      return line;
    })
    .join('\n');
}

/** A stable cache key for a constraint: the same schema compiles to the same grammar. */
export function constraintKey(constraint: Constraint): string {
  return JSON.stringify(constraint);
}
