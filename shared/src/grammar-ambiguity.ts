// How ambiguous a JSON Schema is for an engine that compiles it into a llama.cpp grammar.
// llama.cpp's grammar sampler follows every parse still consistent with the text so far,
// and checks every candidate token against each of them. Alternatives of an `anyOf` that
// begin with the same JSON type (two arrays, two objects, integer and number) stay alive
// together; nested inside each other their parses multiply: a 2.5 KB schema of ten nested
// `anyOf`s of three arrays gave 3^10 parses, and one token took minutes while the whole
// replica (one batch for every sequence) waited. Alternatives of different types part on
// the first character, and an alternative that is finished merges with its siblings, so
// only nesting multiplies.
//
// The rule: the ambiguity of a schema is the largest product, along any path from the root
// into nested values (properties, items, additionalProperties, anyOf alternatives, $ref
// targets), of each anyOf's count of alternatives sharing a starting JSON type. A path that
// can repeat through such an anyOf (recursion via $ref) is unbounded. Pure: no I/O.
// The control plane refuses such schemas at the edge (inference/engine-features.ts), and the
// CPU engine checks again before it compiles one (json-grammar.ts).

/** Parses a grammar-compiled schema may have alive at once; above it the schema is refused. */
export const MAX_GRAMMAR_AMBIGUITY = 64;

type Schema = Record<string, unknown>;

const isRecord = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The JSON type a value of `type` begins with: integers and numbers both begin with a digit or '-'. */
const startOf = (type: unknown): string => (type === 'integer' ? 'number' : String(type));

function valueType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v === 'number' ? 'number' : typeof v;
}

function resolve(root: Schema, ref: string): Schema | undefined {
  if (ref === '#') return root;
  const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
  const defs = match ? root[match[1]!] : undefined;
  if (!isRecord(defs)) return undefined;
  const name = decodeURIComponent(match![2]!).replace(/~1/g, '/').replace(/~0/g, '~');
  const target = defs[name];
  return isRecord(target) ? target : undefined;
}

export interface Ambiguity {
  /** The largest product along a path; Infinity when a recursion repeats an ambiguous anyOf. */
  product: number;
  /** Where the worst chain starts (the outermost anyOf on it), a dotted path into the schema; '' for the root. */
  path: string;
}

/** The ambiguity of `root` (see above). Linear in the schema's size. */
export function grammarAmbiguity(root: Schema): Ambiguity {
  // Nodes are the schema's subschema objects; each gets the first document path it is found at.
  const paths = new Map<Schema, string>();
  const order: Schema[] = [];
  const walk: Array<[unknown, string]> = [[root, '']];
  while (walk.length > 0) {
    const [s, path] = walk.pop()!;
    if (!isRecord(s) || paths.has(s)) continue;
    paths.set(s, path);
    order.push(s);
    const at = (k: string) => (path === '' ? k : `${path}.${k}`);
    for (const k of ['$defs', 'definitions', 'properties'] as const) {
      if (isRecord(s[k])) for (const [name, sub] of Object.entries(s[k] as Schema)) walk.push([sub, at(`${k}.${name}`)]);
    }
    for (const k of ['anyOf', 'oneOf', 'prefixItems', 'items'] as const) {
      if (Array.isArray(s[k])) (s[k] as unknown[]).forEach((sub, i) => walk.push([sub, at(`${k}.${i}`)]));
    }
    for (const k of ['items', 'additionalProperties'] as const) walk.push([s[k], at(k)]);
  }

  const edges = (s: Schema): Schema[] => {
    const out: Schema[] = [];
    const add = (v: unknown) => { if (isRecord(v)) out.push(v); };
    if (typeof s.$ref === 'string') add(resolve(root, s.$ref));
    for (const k of ['anyOf', 'oneOf', 'prefixItems', 'items'] as const) if (Array.isArray(s[k])) (s[k] as unknown[]).forEach(add);
    if (isRecord(s.properties)) Object.values(s.properties).forEach(add);
    add(s.items);
    add(s.additionalProperties);
    return out;
  };

  // The JSON types a value of `s` can begin with.
  const starts = (s: Schema, seen: Set<Schema> = new Set()): Set<string> => {
    if (seen.has(s)) return new Set();
    seen.add(s);
    if (typeof s.$ref === 'string') {
      const target = resolve(root, s.$ref);
      return target ? starts(target, seen) : new Set();
    }
    if (Array.isArray(s.enum)) return new Set(s.enum.map(valueType));
    if ('const' in s) return new Set([valueType(s.const)]);
    const alternatives = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
    if (alternatives) {
      const out = new Set<string>();
      for (const alt of alternatives) if (isRecord(alt)) for (const t of starts(alt, seen)) out.add(t);
      return out;
    }
    if (Array.isArray(s.type)) return new Set(s.type.map(startOf));
    if (s.type !== undefined) return new Set([startOf(s.type)]);
    if (isRecord(s.properties)) return new Set(['object']);
    return new Set(['object', 'array', 'string', 'number', 'boolean', 'null']);
  };

  // How many of a node's alternatives can begin with one JSON type (1 for a node that is no union).
  const factor = (s: Schema): number => {
    const alternatives = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
    if (!alternatives) return 1;
    const counts = new Map<string, number>();
    let most = 1;
    for (const alt of alternatives) {
      if (!isRecord(alt)) continue;
      for (const t of starts(alt)) {
        const n = (counts.get(t) ?? 0) + 1;
        counts.set(t, n);
        most = Math.max(most, n);
      }
    }
    return most;
  };

  // Tarjan's strongly connected components (recursion via $ref), emitted sinks first, so the
  // largest product below each component is known before the components above it.
  const index = new Map<Schema, number>();
  const low = new Map<Schema, number>();
  const onStack = new Set<Schema>();
  const stack: Schema[] = [];
  const component = new Map<Schema, number>();
  const best: Array<{ product: number; top: Schema | undefined }> = [];
  let counter = 0;
  const finish = (v: Schema): void => {
    const members: Schema[] = [];
    let w: Schema;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      members.push(w);
    } while (w !== v);
    const id = best.length;
    for (const m of members) component.set(m, id);
    const cyclic = members.length > 1 || edges(v).includes(v);
    // Below: the best product reachable from any member, outside the component.
    let below = { product: 1, top: undefined as Schema | undefined };
    for (const m of members) {
      for (const e of edges(m)) {
        const c = component.get(e)!;
        if (c !== id && best[c]!.product > below.product) below = best[c]!;
      }
    }
    if (cyclic) {
      const ambiguous = members.find((m) => factor(m) > 1);
      best.push(ambiguous ? { product: Infinity, top: ambiguous } : below);
    } else {
      const f = factor(v);
      best.push(f > 1 ? { product: f * below.product, top: v } : below);
    }
  };
  // Iterative: a chain of a few thousand $refs would overflow the call stack.
  const strongConnect = (start: Schema): void => {
    const frames: Array<{ v: Schema; next: Schema[]; i: number }> = [];
    const enter = (v: Schema) => {
      index.set(v, counter);
      low.set(v, counter++);
      stack.push(v);
      onStack.add(v);
      frames.push({ v, next: edges(v), i: 0 });
    };
    enter(start);
    while (frames.length > 0) {
      const frame = frames[frames.length - 1]!;
      if (frame.i < frame.next.length) {
        const w = frame.next[frame.i++]!;
        if (!index.has(w)) enter(w);
        else if (onStack.has(w)) low.set(frame.v, Math.min(low.get(frame.v)!, index.get(w)!));
        continue;
      }
      frames.pop();
      const parent = frames[frames.length - 1];
      if (parent) low.set(parent.v, Math.min(low.get(parent.v)!, low.get(frame.v)!));
      if (low.get(frame.v) === index.get(frame.v)) finish(frame.v);
    }
  };
  strongConnect(root);
  const result = best[component.get(root)!]!;
  const top = result.top === undefined ? '' : paths.get(result.top) ?? '';
  return { product: result.product, path: top };
}

/** Why a grammar engine refuses `schema` as too ambiguous, or undefined when it is within the bound. */
export function grammarAmbiguityProblem(schema: Schema, max: number = MAX_GRAMMAR_AMBIGUITY): { path: string; message: string } | undefined {
  const { product, path } = grammarAmbiguity(schema);
  if (product <= max) return undefined;
  const how = product === Infinity
    ? 'a recursive $ref repeats an anyOf whose alternatives begin with the same JSON type, so their parses multiply without bound'
    : `nested anyOf alternatives that begin with the same JSON type multiply to ${product} parses the grammar must follow at once, more than ${max}`;
  return {
    path: path === '' ? 'anyOf' : `${path}.anyOf`,
    message: `the schema is too ambiguous to enforce with a grammar: ${how}; give the alternatives of each anyOf different types, or nest fewer such unions`,
  };
}
