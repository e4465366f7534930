// The smallest value a JSON Schema accepts, built deterministically: what sandbox keys
// answer for structured outputs and forced tool calls, and the proof, when a
// response_format arrives, that its schema can be satisfied by a finite value (a $ref
// cycle through required properties cannot, and would make an engine generate forever).
import { isRecord, resolveLocalRef } from './json-schema-walk.js';

/** Returned when no finite value satisfies the schema (or the work budget ran out). */
export const UNSATISFIABLE: unique symbol = Symbol('unsatisfiable');
/** Returned when no value was found within the size bound, and one was given up for its size. */
export const TOO_LARGE: unique symbol = Symbol('too large');
type Result = unknown | typeof UNSATISFIABLE | typeof TOO_LARGE;

/**
 * Serialized characters a minimal instance may take. The step budget alone bounded pieces,
 * not bytes: `minItems: 8000` of a 60 KB `const` passed it and its JSON took gigabytes.
 * 64 KiB is about 16,000 tokens of JSON, as large as any real schema's smallest value.
 */
export const MAX_INSTANCE_CHARS = 64 * 1024;

const EXAMPLE = 'example';

/** Example strings per `format`, each valid for Ajv's format checks. */
const FORMAT_EXAMPLES: Record<string, string> = {
  'date-time': '1970-01-01T00:00:00Z',
  date: '1970-01-01',
  time: '00:00:00Z',
  duration: 'P1D',
  email: 'user@example.com',
  hostname: 'example.com',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
  uuid: '00000000-0000-4000-8000-000000000000',
};

/**
 * The minimal instance of `root`, UNSATISFIABLE, or TOO_LARGE when a value exists but
 * none found serializes within `maxChars`. `budget` bounds the subschemas visited (a schema
 * of many alternatives each referring back could otherwise take exponential time);
 * `maxChars` bounds the JSON text of the value, const and enum values included, so neither
 * the value nor its serialization can grow past it.
 */
export function minimalInstance(root: Record<string, unknown>, budget = 20_000, maxChars = MAX_INSTANCE_CHARS): Result {
  let steps = 0;
  const active = new Set<Record<string, unknown>>();
  // JSON characters of the value built so far on the current path; a branch that fails
  // gives its characters back, so an alternative that fits can still be taken.
  let chars = 0;
  let overflowed = false;
  // The same const or enum value may be placed thousands of times (minItems): measured once.
  const sizes = new Map<unknown, number>();
  const sizeOf = (value: unknown): number => {
    let size = sizes.get(value);
    if (size === undefined) sizes.set(value, (size = JSON.stringify(value)?.length ?? 4));
    return size;
  };
  /** Takes `n` characters of the bound; false (and remembered) when they do not fit. */
  const take = (n: number): boolean => {
    if (chars + n > maxChars) {
      overflowed = true;
      return false;
    }
    chars += n;
    return true;
  };
  const placed = (value: unknown): Result => (take(sizeOf(value)) ? value : UNSATISFIABLE);
  const attempt = (make: () => Result): Result => {
    const before = chars;
    const value = make();
    if (value === UNSATISFIABLE) chars = before;
    return value;
  };

  const build = (schema: unknown): Result => {
    if (++steps > budget) return UNSATISFIABLE;
    if (schema === true || schema === undefined) return placed(null);
    if (!isRecord(schema)) return UNSATISFIABLE;
    // Recursion back into a schema still being built has no finite value on this path.
    if (active.has(schema)) return UNSATISFIABLE;
    active.add(schema);
    try {
      return attempt(() => buildFresh(schema));
    } finally {
      active.delete(schema);
    }
  };

  const firstOf = (alternatives: unknown[]): Result => {
    for (const alt of alternatives) {
      const value = build(alt);
      if (value !== UNSATISFIABLE) return value;
    }
    return UNSATISFIABLE;
  };

  const buildFresh = (s: Record<string, unknown>): Result => {
    if (typeof s.$ref === 'string') {
      const target = resolveLocalRef(root, s.$ref);
      return target === undefined ? UNSATISFIABLE : build(target);
    }
    if ('const' in s) return placed(s.const);
    if (Array.isArray(s.enum)) return s.enum.length > 0 ? placed(s.enum[0]) : UNSATISFIABLE;
    if (Array.isArray(s.anyOf)) return firstOf(s.anyOf);
    if (Array.isArray(s.oneOf)) return firstOf(s.oneOf);
    if (Array.isArray(s.allOf) && s.allOf.length === 1) return build(s.allOf[0]);
    const types = Array.isArray(s.type) ? (s.type as unknown[]) : s.type === undefined ? [isRecord(s.properties) ? 'object' : 'null'] : [s.type];
    // null first when allowed: it ends recursion and is the smallest value.
    const ordered = types.includes('null') ? ['null', ...types.filter((t) => t !== 'null')] : types;
    for (const type of ordered) {
      const value = attempt(() => ofType(s, type));
      if (value !== UNSATISFIABLE) return value;
    }
    return UNSATISFIABLE;
  };

  const ofType = (s: Record<string, unknown>, type: unknown): Result => {
    switch (type) {
      case 'null':
        return placed(null);
      case 'boolean':
        return placed(false);
      case 'string': {
        const format = typeof s.format === 'string' ? FORMAT_EXAMPLES[s.format] : undefined;
        if (format !== undefined) return placed(format);
        const min = typeof s.minLength === 'number' ? s.minLength : 0;
        const max = typeof s.maxLength === 'number' ? s.maxLength : Infinity;
        // A readable word where the length bounds allow it.
        if (min <= EXAMPLE.length && max >= EXAMPLE.length) return placed(EXAMPLE);
        if (min > max) return UNSATISFIABLE;
        // Measured before the string is made: minLength 10^9 must not allocate it.
        const length = Math.max(0, Math.ceil(min));
        return take(length + 2) ? 'x'.repeat(length) : UNSATISFIABLE;
      }
      case 'integer':
      case 'number': {
        const value = numberIn(s, type === 'integer');
        return value === UNSATISFIABLE ? value : placed(value);
      }
      case 'array': {
        const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
        const min = typeof s.minItems === 'number' ? Math.max(0, Math.ceil(s.minItems)) : 0;
        // Brackets, and at least one character and a comma an item: refused before the loop.
        if (!take(min === 0 ? 2 : 2 * min + 1)) return UNSATISFIABLE;
        chars -= min === 0 ? 0 : min;
        const out: unknown[] = [];
        for (let i = 0; i < min; i++) {
          const item = build(i < prefix.length ? prefix[i] : Array.isArray(s.items) ? s.additionalItems : s.items);
          if (item === UNSATISFIABLE) return UNSATISFIABLE;
          out.push(item);
        }
        return out;
      }
      case 'object': {
        const properties = isRecord(s.properties) ? s.properties : {};
        // Walked as given, not filtered first: a schema revisited thousands of times would
        // copy a long `required` on every visit.
        const required: unknown[] = Array.isArray(s.required) ? s.required : [];
        if (!take(2)) return UNSATISFIABLE;
        const out: Record<string, unknown> = {};
        let first = true;
        for (const name of required) {
          if (typeof name !== 'string') continue;
          // The key, its colon and (after the first) a comma.
          if (!take(sizeOf(name) + 1 + (first ? 0 : 1))) return UNSATISFIABLE;
          first = false;
          const value = build(Object.hasOwn(properties, name) ? properties[name] : s.additionalProperties);
          if (value === UNSATISFIABLE) return UNSATISFIABLE;
          out[name] = value;
        }
        return out;
      }
      default:
        return UNSATISFIABLE;
    }
  };

  const value = build(root);
  return value === UNSATISFIABLE && overflowed ? TOO_LARGE : value;
}

/** The number closest to 0 within the bounds (and a multiple of multipleOf when given). */
function numberIn(s: Record<string, unknown>, integer: boolean): Result {
  const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  const step = num(s.multipleOf) ?? (integer ? 1 : undefined);
  let low = num(s.minimum) ?? -Infinity;
  let high = num(s.maximum) ?? Infinity;
  const exMin = num(s.exclusiveMinimum);
  const exMax = num(s.exclusiveMaximum);
  // exclusive bounds: move inward by a step (or a small fraction for unstepped numbers).
  const nudge = (v: number) => (step !== undefined ? step : Math.max(Math.abs(v) * 1e-9, 1e-9));
  if (exMin !== undefined) low = Math.max(low, exMin + (step !== undefined ? 0 : nudge(exMin)));
  if (exMax !== undefined) high = Math.min(high, exMax - (step !== undefined ? 0 : nudge(exMax)));
  let value = Math.min(Math.max(0, low), high);
  if (step !== undefined) {
    // The multiple nearest the clamped value, inward from whichever bound it sits on.
    value = value === high && high !== 0 ? Math.floor(value / step) * step : Math.ceil(value / step) * step;
    if (exMin !== undefined && value <= exMin) value += step;
    if (exMax !== undefined && value >= exMax) value -= step;
    if (value > high || value < low || (exMin !== undefined && value <= exMin) || (exMax !== undefined && value >= exMax)) return UNSATISFIABLE;
  }
  return value >= low && value <= high ? value : UNSATISFIABLE;
}
