// The model catalog: a JSON file in the repo, validated against this schema at start-up.
// It says what each model is, how it is priced and whether it is being retired.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Type, type Static } from '@sinclair/typebox';
import { parseWithSchema } from '@svc/shared';

export const POOLS = ['na', 'eu', 'apac'] as const;
export type Pool = (typeof POOLS)[number];

export const QUANTIZATIONS = ['fp16', 'fp8', 'int4'] as const;
export type Quantization = (typeof QUANTIZATIONS)[number];

const Price = Type.Object(
  {
    input_per_million_tokens: Type.Number({ minimum: 0 }),
    output_per_million_tokens: Type.Number({ minimum: 0 }),
  },
  { additionalProperties: false },
);

export const RateCardSchema = Type.Object(
  {
    id: Type.String({ minLength: 1 }),
    currency: Type.Literal('usd'),
    /** Price per quantization variant; the cheapest is a model's default variant. */
    prices: Type.Object(
      { fp16: Type.Optional(Price), fp8: Type.Optional(Price), int4: Type.Optional(Price) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const CatalogModelSchema = Type.Object(
  {
    id: Type.String({ pattern: '^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$' }),
    kind: Type.Union([Type.Literal('chat'), Type.Literal('embedding')]),
    created: Type.Integer({ minimum: 0 }),
    owned_by: Type.String({ minLength: 1 }),
    family: Type.String({ minLength: 1 }),
    description: Type.Optional(Type.String()),
    context_window: Type.Integer({ minimum: 1 }),
    /** Embedding models only: vector length, and whether it was Matryoshka-trained. */
    dimensions: Type.Optional(Type.Integer({ minimum: 1 })),
    matryoshka: Type.Optional(Type.Boolean()),
    quantizations: Type.Array(Type.Union(QUANTIZATIONS.map((q) => Type.Literal(q))), { minItems: 1, uniqueItems: true }),
    rate_card_id: Type.String({ minLength: 1 }),
    deprecation: Type.Optional(
      Type.Object(
        {
          announced_at: Type.String({ description: 'RFC 3339 timestamp' }),
          shutdown_at: Type.String({ description: 'RFC 3339 timestamp' }),
          replacement: Type.String({ minLength: 1 }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const CatalogSchema = Type.Object(
  {
    models: Type.Array(CatalogModelSchema, { minItems: 1 }),
    rate_cards: Type.Array(RateCardSchema),
  },
  { additionalProperties: false },
);

export type CatalogModel = Static<typeof CatalogModelSchema>;
export type RateCard = Static<typeof RateCardSchema>;
export type Catalog = Static<typeof CatalogSchema>;

export const DEFAULT_CATALOG_PATH = fileURLToPath(new URL('../../catalog/models.json', import.meta.url));

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Checks the cross-references a JSON schema cannot express; returns problems found. */
export function catalogProblems(catalog: Catalog): string[] {
  const problems: string[] = [];
  const ids = new Set<string>();
  const cards = new Map(catalog.rate_cards.map((c) => [c.id, c]));
  for (const m of catalog.models) {
    if (ids.has(m.id)) problems.push(`model ${m.id} is listed twice`);
    ids.add(m.id);
    const card = cards.get(m.rate_card_id);
    if (!card) problems.push(`model ${m.id} names unknown rate card ${m.rate_card_id}`);
    for (const q of m.quantizations) {
      if (card && !card.prices[q]) problems.push(`rate card ${m.rate_card_id} has no ${q} price for model ${m.id}`);
    }
    if (m.kind === 'embedding' && m.dimensions === undefined) problems.push(`embedding model ${m.id} needs dimensions`);
    if (m.deprecation) {
      for (const field of ['announced_at', 'shutdown_at'] as const) {
        if (!RFC3339.test(m.deprecation[field])) problems.push(`model ${m.id}: deprecation.${field} is not RFC 3339`);
      }
    }
  }
  for (const m of catalog.models) {
    if (m.deprecation && !ids.has(m.deprecation.replacement)) {
      problems.push(`model ${m.id}: replacement ${m.deprecation.replacement} is not in the catalog`);
    }
  }
  return problems;
}

export function parseCatalog(value: unknown, source: string): Catalog {
  const catalog = parseWithSchema(CatalogSchema, value, `model catalog ${source}`);
  const problems = catalogProblems(catalog);
  if (problems.length > 0) throw new Error(`model catalog ${source} is invalid: ${problems.join('; ')}`);
  return catalog;
}

export function loadCatalog(path: string = DEFAULT_CATALOG_PATH): Catalog {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read model catalog ${path}: ${(err as Error).message}`);
  }
  return parseCatalog(raw, path);
}

/** A model's variants, cheapest first by combined token price; ties keep the catalog's order. */
export function quantizationsByPrice(model: CatalogModel, card: RateCard | undefined): Quantization[] {
  const cost = (q: Quantization): number => {
    const p = card?.prices[q];
    return p ? p.input_per_million_tokens + p.output_per_million_tokens : Number.POSITIVE_INFINITY;
  };
  return [...model.quantizations].sort((a, b) => cost(a) - cost(b));
}

/** The variant a request gets when it names none: the cheapest by combined token price. */
export function cheapestQuantization(model: CatalogModel, card: RateCard): Quantization {
  return quantizationsByPrice(model, card)[0]!;
}
