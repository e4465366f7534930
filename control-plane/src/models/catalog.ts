// The model catalog: a JSON file in the repo, validated against this schema at start-up.
// It says what each model is, how it is priced, whether it is being retired, and which
// engine serves it with which weights per quantization (the `serving` block).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Type, type Static } from '@sinclair/typebox';
import { parseWithSchema } from '@svc/shared';
import { imageReferenceProblem } from '../instances/input-validation.js';

export { POOLS, type Pool } from './pools.js';

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

export const ENGINES = ['vllm', 'cpu'] as const;
export type Engine = (typeof ENGINES)[number];

const Weights = Type.Object(
  {
    /** A Hugging Face repo id or a path inside the image (vLLM), a GGUF file inside the image (cpu). */
    path: Type.String({ minLength: 1 }),
    /** vLLM int4 only: how the checkpoint was quantized. */
    method: Type.Optional(Type.Union([Type.Literal('awq'), Type.Literal('gptq')])),
  },
  { additionalProperties: false },
);

/** How a model is served: the engine, its image, GPUs per replica, extra args, weights per variant. */
export const ServingSchema = Type.Object(
  {
    engine: Type.Union(ENGINES.map((e) => Type.Literal(e))),
    image: Type.String({ minLength: 1 }),
    /** GPUs per replica: 0 for the cpu engine, 1 or more for vLLM (tensor parallel when > 1). */
    gpus: Type.Integer({ minimum: 0, maximum: 8 }),
    /** Appended to the engine's own arguments. */
    args: Type.Optional(Type.Array(Type.String())),
    weights: Type.Object({ fp16: Type.Optional(Weights), fp8: Type.Optional(Weights), int4: Type.Optional(Weights) }, { additionalProperties: false }),
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
    serving: ServingSchema,
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
export type Serving = Static<typeof ServingSchema>;
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
    problems.push(...servingProblems(m));
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

/** The serving block's rules: weights for exactly the model's variants, engine-specific needs. */
function servingProblems(m: CatalogModel): string[] {
  const problems: string[] = [];
  const serving = m.serving;
  const where = `model ${m.id}: serving`;
  const imageProblem = imageReferenceProblem(serving.image);
  if (imageProblem) problems.push(`${where}.image: ${imageProblem}`);
  const weightKeys = QUANTIZATIONS.filter((q) => serving.weights[q] !== undefined);
  const offered = QUANTIZATIONS.filter((q) => m.quantizations.includes(q));
  if (weightKeys.join(',') !== offered.join(',')) {
    problems.push(`${where}.weights has ${weightKeys.join(', ') || 'nothing'}; it must have exactly the model's quantizations (${offered.join(', ')})`);
  }
  if (serving.engine === 'cpu' && serving.gpus !== 0) problems.push(`${where}.gpus must be 0 for the cpu engine`);
  if (serving.engine === 'vllm' && serving.gpus < 1) problems.push(`${where}.gpus must be at least 1 for vllm`);
  for (const q of QUANTIZATIONS) {
    const method = serving.weights[q]?.method;
    if (serving.engine === 'vllm' && q === 'int4' && serving.weights.int4 && !method) {
      problems.push(`${where}.weights.int4 needs method awq or gptq (vllm serves int4 from an AWQ/GPTQ checkpoint)`);
    }
    if (method && (serving.engine !== 'vllm' || q !== 'int4')) problems.push(`${where}.weights.${q}.method applies only to vllm int4 weights`);
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

/**
 * A model's variants, cheapest first by combined token price; ties keep the catalog's
 * order. The first is what a request gets when it names none.
 */
export function quantizationsByPrice(model: CatalogModel, card: RateCard | undefined): Quantization[] {
  const cost = (q: Quantization): number => {
    const p = card?.prices[q];
    return p ? p.input_per_million_tokens + p.output_per_million_tokens : Number.POSITIVE_INFINITY;
  };
  return [...model.quantizations].sort((a, b) => cost(a) - cost(b));
}
