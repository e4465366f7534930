// Walks a client's JSON Schema (response_format, tool parameters) once, with a node budget,
// so every check that follows works on a document already known to be small and shallow.
// Pure: no Ajv, no I/O.

/** Keywords whose value is one subschema. */
const SCHEMA_KEYWORDS = ['additionalProperties', 'items', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems', 'additionalItems'] as const;
/** Keywords whose value is a list of subschemas. */
const LIST_KEYWORDS = ['anyOf', 'oneOf', 'allOf', 'prefixItems', 'items'] as const;
/**
 * Keywords whose value maps names to subschemas. Draft-04 to 07's `dependencies` maps to a
 * subschema or a list of names (skipped); walked so its enums are counted and checked too.
 */
const MAP_KEYWORDS = ['properties', '$defs', 'definitions', 'patternProperties', 'dependentSchemas', 'dependencies'] as const;

export interface SchemaNode {
  schema: Record<string, unknown>;
  /** JSON pointer-like path from the root, e.g. `properties.city.enum`; '' is the root. */
  path: string;
  /** Objects (`type: "object"` or `properties`) enclosing this node, itself included. */
  objectDepth: number;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const join = (path: string, key: string | number): string => (path === '' ? String(key) : `${path}.${key}`);

/** Whether this node describes an object (counts toward nesting). */
export const isObjectSchema = (s: Record<string, unknown>): boolean =>
  s.type === 'object' || (Array.isArray(s.type) && s.type.includes('object')) || isRecord(s.properties);

/**
 * Every subschema of `root`, depth-first; stops with an error string once more than
 * `maxNodes` nodes or a document nesting past `maxNesting` is seen, before recursing further.
 */
export function walkSchema(root: Record<string, unknown>, maxNodes: number, maxNesting: number): SchemaNode[] | string {
  const out: SchemaNode[] = [];
  const stack: Array<SchemaNode & { nesting: number }> = [{ schema: root, path: '', objectDepth: isObjectSchema(root) ? 1 : 0, nesting: 0 }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (out.length >= maxNodes) return `the schema has more than ${maxNodes} subschemas`;
    if (node.nesting > maxNesting) return `the schema nests deeper than ${maxNesting} levels (at ${node.path})`;
    out.push({ schema: node.schema, path: node.path, objectDepth: node.objectDepth });
    const child = (schema: unknown, path: string): void => {
      if (!isRecord(schema)) return;
      stack.push({ schema, path, objectDepth: node.objectDepth + (isObjectSchema(schema) ? 1 : 0), nesting: node.nesting + 1 });
    };
    const s = node.schema;
    for (const key of SCHEMA_KEYWORDS) child(s[key], join(node.path, key));
    for (const key of LIST_KEYWORDS) {
      const list = s[key];
      if (Array.isArray(list)) list.forEach((item, i) => child(item, join(join(node.path, key), i)));
    }
    for (const key of MAP_KEYWORDS) {
      const map = s[key];
      if (isRecord(map)) for (const [name, item] of Object.entries(map)) child(item, join(join(node.path, key), name));
    }
  }
  return out;
}

/**
 * The subschema a local `$ref` points at (`#`, `#/$defs/<name>`, `#/definitions/<name>`,
 * JSON-pointer escaped), or undefined when it points nowhere or is not local.
 */
export function resolveLocalRef(root: Record<string, unknown>, ref: string): Record<string, unknown> | undefined {
  if (ref === '#') return root;
  const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
  if (!match) return undefined;
  const defs = root[match[1]!];
  if (!isRecord(defs)) return undefined;
  const name = decodeURIComponent(match[2]!).replace(/~1/g, '/').replace(/~0/g, '~');
  const target = defs[name];
  return isRecord(target) ? target : undefined;
}
