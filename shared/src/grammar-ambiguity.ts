// How ambiguous a JSON Schema is for an engine that compiles it into a llama.cpp grammar.
// llama.cpp's grammar sampler follows every parse still consistent with the text so far,
// and checks every candidate token against each of them. Alternatives of an `anyOf` that
// begin the same way (two arrays, integer and number, two objects whose first key is the same)
// stay alive together; nested inside each other their parses multiply: a 2.5 KB schema of ten
// nested `anyOf`s of three arrays gave 3^10 parses, and one token took minutes while the whole
// replica (one batch for every sequence) waited. Alternatives part where they begin
// differently: at the first character for different JSON types, at the first key for objects
// (the grammar writes every listed property, in `properties` order), at that key's value when
// it is a const or enum. An alternative that is finished merges with its siblings, so only
// nesting multiplies.
//
// The rule: each alternative of a union counts the alternatives (itself included) that can
// begin as it does. The ambiguity of a schema is the largest product of those counts along any
// path from the root into nested values (properties, items, additionalProperties, anyOf
// alternatives, $ref targets); an alternative no other shares its start with counts 1, so
// products multiply only through alternatives that share one. A path that can repeat through
// an alternative that shares its start (recursion via $ref) is unbounded. Pure: no I/O.
// The control plane refuses such schemas at the edge (inference/engine-features.ts), and the
// CPU engine checks again before it compiles one (json-grammar.ts).

/** Parses a grammar-compiled schema may have alive at once; above it the schema is refused. */
export const MAX_GRAMMAR_AMBIGUITY = 64;

type Schema = Record<string, unknown>;

const isRecord = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The JSON type a value of `type` begins with: integers and numbers both begin with a digit or '-'. */
const startOf = (type: unknown): string => (type === 'integer' ? 'number' : String(type));

/** Joins the tokens of a start (see `starts` below); JSON.stringify never writes it raw. */
const SEP = '\u0000';

function valueType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v === 'number' ? 'number' : typeof v;
}

/** The start of a literal value: its type, then the value itself (scalars hold nothing nested). */
const literal = (v: unknown): string => (isRecord(v) || Array.isArray(v) ? valueType(v) : `${valueType(v)}${SEP}${JSON.stringify(v)}`);

/** The values a const or enum schema allows, or undefined for any other schema. */
const literalsOf = (s: Schema): unknown[] | undefined => (Array.isArray(s.enum) ? s.enum : 'const' in s ? [s.const] : undefined);

const alternativesOf = (s: Schema): unknown[] | undefined => (Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined);

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
  /** The largest product along a path; Infinity when a recursion repeats an alternative that shares its start. */
  product: number;
  /** Where the worst chain starts (the outermost anyOf on it), a dotted path into the schema; '' for the root. */
  path: string;
  /** The keyword of that node that holds the alternatives: anyOf, oneOf, or a type list's type. */
  keyword: 'anyOf' | 'oneOf' | 'type';
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

  // A start is where a value parts from values of other alternatives: a path of tokens joined
  // by SEP, from the JSON type down to a literal. A start shares with another when one is a
  // prefix of the other ('' is any value, 'object' any object, 'object␀"kind"' an object whose
  // first key is kind, 'object␀"kind"␀"a"' one whose kind is "a").
  const starts = (s: Schema): Set<string> => startsOf(s, 0).tokens;
  const startMemo = new Map<Schema, Set<string>>();
  const onPath = new Map<Schema, number>();
  // `low`: the shallowest node on the current path the answer depended on (Infinity for none);
  // an answer that depended on a node above it is incomplete and not remembered.
  const startsOf = (s: Schema, depth: number): { tokens: Set<string>; low: number } => {
    const memo = startMemo.get(s);
    if (memo) return { tokens: memo, low: Infinity };
    const on = onPath.get(s);
    if (on !== undefined) return { tokens: new Set(), low: on }; // recursion adds no start of its own
    onPath.set(s, depth);
    let low = Infinity;
    const sub = (t: Schema): Set<string> => {
      const r = startsOf(t, depth + 1);
      low = Math.min(low, r.low);
      return r.tokens;
    };
    const tokens = new Set<string>();
    const literals = literalsOf(s);
    if (typeof s.$ref === 'string') {
      const target = resolve(root, s.$ref);
      if (target) for (const t of sub(target)) tokens.add(t);
    } else if (literals) {
      for (const v of literals) tokens.add(literal(v));
    } else if (alternativesOf(s)) {
      for (const alt of alternativesOf(s)!) if (isRecord(alt)) for (const t of sub(alt)) tokens.add(t);
    } else {
      const types = Array.isArray(s.type) ? s.type : s.type !== undefined ? [s.type] : isRecord(s.properties) ? ['object'] : undefined;
      if (types === undefined) tokens.add('');
      else for (const type of types) {
        if (type === 'object') for (const t of objectStarts(s)) tokens.add(t);
        else tokens.add(startOf(type));
      }
    }
    onPath.delete(s);
    if (low >= depth) startMemo.set(s, tokens);
    return { tokens, low: low >= depth ? Infinity : low };
  };

  // The grammar writes every listed property, in `properties` order (required or not: see the
  // CPU engine's json-grammar.ts), so an object parts from others at its first key, and at that
  // key's value when it is a literal. Without listed properties it writes any members, or none
  // when additionalProperties is false.
  const objectStarts = (s: Schema): string[] => {
    const first = isRecord(s.properties) ? Object.keys(s.properties)[0] : undefined;
    if (first === undefined) return [s.additionalProperties === false ? `object${SEP}}` : 'object'];
    const key = `object${SEP}${JSON.stringify(first)}`;
    let value = (s.properties as Schema)[first];
    if (isRecord(value) && typeof value.$ref === 'string') value = resolve(root, value.$ref);
    const literals = isRecord(value) ? literalsOf(value) : undefined;
    return literals && literals.length > 0 ? literals.map((v) => `${key}${SEP}${JSON.stringify(v)}`) : [key];
  };

  // For each alternative, how many alternatives (itself included) can begin the way it does.
  const sharing = (alternatives: Schema[]): number[] => {
    const holders = new Map<string, number[]>();
    alternatives.forEach((alt, i) => {
      for (const t of starts(alt)) {
        const list = holders.get(t) ?? [];
        list.push(i);
        holders.set(t, list);
      }
    });
    const most = alternatives.map(() => 1);
    for (const t of holders.keys()) {
      // The alternatives alive after text that begins as t: those holding t or a prefix of it.
      const alive = new Set<number>();
      const parts = t === '' ? [] : t.split(SEP);
      for (let n = parts.length; n >= 0; n--) for (const i of holders.get(parts.slice(0, n).join(SEP)) ?? []) alive.add(i);
      for (const i of alive) most[i] = Math.max(most[i]!, alive.size);
    }
    return most;
  };

  /** The parses a node itself begins with: a type list's repetition (a leaf has no edge to carry it). */
  const base = (s: Schema): number => {
    if (!Array.isArray(s.type)) return 1;
    const counts = new Map<string, number>();
    for (const t of s.type) counts.set(startOf(t), (counts.get(startOf(t)) ?? 0) + 1);
    return Math.max(1, ...counts.values());
  };

  // A node's children, each with how many parses a path into it multiplies by: an alternative
  // by the alternatives that begin as it does; the values of a type list that repeats a
  // starting type (['integer', 'number']) by that repetition; anything else by 1.
  const edgeMemo = new Map<Schema, Array<[Schema, number]>>();
  const edges = (s: Schema): Array<[Schema, number]> => {
    const memo = edgeMemo.get(s);
    if (memo) return memo;
    const out: Array<[Schema, number]> = [];
    const repeat = base(s);
    const add = (v: unknown) => { if (isRecord(v)) out.push([v, repeat]); };
    if (typeof s.$ref === 'string') add(resolve(root, s.$ref));
    const alternatives = alternativesOf(s)?.filter(isRecord);
    if (alternatives) {
      const k = sharing(alternatives);
      alternatives.forEach((alt, i) => out.push([alt, k[i]!]));
    }
    if (Array.isArray(s.prefixItems)) s.prefixItems.forEach(add);
    if (Array.isArray(s.items)) s.items.forEach(add);
    if (isRecord(s.properties)) Object.values(s.properties).forEach(add);
    add(s.items);
    add(s.additionalProperties);
    edgeMemo.set(s, out);
    return out;
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
    // A cycle through an alternative that shares its start repeats that sharing without bound;
    // a cycle of edges that multiply by 1 adds nothing, whatever unions hang off it.
    for (const m of members) {
      for (const [e, k] of edges(m)) {
        if (k > 1 && component.get(e) === id) {
          best.push({ product: Infinity, top: m });
          return;
        }
      }
    }
    // Otherwise every member can reach what any member reaches: the best product out of the component.
    let result = { product: 1, top: undefined as Schema | undefined };
    for (const m of members) {
      if (base(m) > result.product) result = { product: base(m), top: m };
      for (const [e, k] of edges(m)) {
        const c = component.get(e)!;
        if (c === id) continue;
        const product = k * best[c]!.product;
        if (product > result.product) result = { product, top: k > 1 ? m : best[c]!.top };
      }
    }
    best.push(result);
  };
  // Iterative: a chain of a few thousand $refs would overflow the call stack.
  const strongConnect = (start: Schema): void => {
    const frames: Array<{ v: Schema; next: Schema[]; i: number }> = [];
    const enter = (v: Schema) => {
      index.set(v, counter);
      low.set(v, counter++);
      stack.push(v);
      onStack.add(v);
      frames.push({ v, next: edges(v).map(([e]) => e), i: 0 });
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
  const keyword = result.top === undefined || Array.isArray(result.top.anyOf) ? 'anyOf' : Array.isArray(result.top.oneOf) ? 'oneOf' : 'type';
  return { product: result.product, path: top, keyword };
}

/** Why a grammar engine refuses `schema` as too ambiguous, or undefined when it is within the bound. */
export function grammarAmbiguityProblem(schema: Schema, max: number = MAX_GRAMMAR_AMBIGUITY): { path: string; message: string } | undefined {
  const { product, path, keyword } = grammarAmbiguity(schema);
  if (product <= max) return undefined;
  const how = product === Infinity
    ? 'a recursive $ref repeats an anyOf whose alternatives begin the same way (the same JSON type; for objects, the same first property and value), so their parses multiply without bound'
    : `nested anyOf alternatives that begin the same way (the same JSON type; for objects, the same first property and value) multiply to ${product} parses the grammar must follow at once, more than ${max}`;
  return {
    path: path === '' ? keyword : `${path}.${keyword}`,
    message: `the schema is too ambiguous to enforce with a grammar: ${how}; give the alternatives of each anyOf different types or different first properties (a discriminator first, such as a const "type"), or nest fewer such unions`,
  };
}
