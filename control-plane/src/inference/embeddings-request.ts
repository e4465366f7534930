// The embeddings request (spec 2.3): its schema, the checks a schema cannot say, and the
// vector work the control plane does itself: batching inputs for replicas, Matryoshka
// truncation with re-normalisation, and base64 as raw little-endian float32.
import { Type, type Static } from '@sinclair/typebox';
import { ApiError } from '@svc/shared';
import { StringEnum } from '../http/schemas.js';
import { QUANTIZATIONS, type CatalogModel } from '../models/catalog.js';

export const MAX_EMBEDDING_INPUTS = 2048;
/** Spec 8: latency is roughly flat up to about 64 inputs per batch, then linear. */
export const EMBEDDING_BATCH_SIZE = 64;
/** Bytes of input one token of context may stand for (see chat-request.ts). */
export const MAX_INPUT_BYTES_PER_TOKEN = 16;

export const EmbeddingsRequest = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 128 }),
    input: Type.Union(
      [
        Type.String(),
        Type.Array(Type.String(), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
        // OpenAI's token-id forms: taken by the schema only to be refused saying why.
        Type.Array(Type.Integer(), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
        Type.Array(Type.Array(Type.Integer()), { minItems: 1, maxItems: MAX_EMBEDDING_INPUTS }),
      ],
      { description: `A string, or up to ${MAX_EMBEDDING_INPUTS} strings; each within the model's context. Token ids (OpenAI's other forms) are refused.` },
    ),
    encoding_format: Type.Optional(StringEnum(['float', 'base64'] as const)),
    dimensions: Type.Optional(Type.Integer({ minimum: 1, description: 'Matryoshka models: truncate to this many dimensions. Ignored for other models.' })),
    quantization: Type.Optional(StringEnum(QUANTIZATIONS)),
    user: Type.Optional(Type.String({ maxLength: 256 })),
  },
  { additionalProperties: false },
);

export type EmbeddingsRequest = Static<typeof EmbeddingsRequest>;

export interface EmbeddingPlan {
  inputs: string[];
  /** The length vectors are cut to; null keeps the model's own. */
  dimensions: number | null;
}

/** Checks a shape-valid request against `model` and says what to compute. */
export function planEmbeddings(body: EmbeddingsRequest, model: CatalogModel): EmbeddingPlan {
  const fail = (message: string, param: string): never => {
    throw new ApiError('invalid_request', message, { param });
  };
  if (model.kind !== 'embedding') fail(`model ${model.id} is a chat model; use /v1/chat/completions`, 'model');
  if (body.quantization !== undefined && !model.quantizations.includes(body.quantization)) {
    fail(`model ${model.id} is offered in ${model.quantizations.join(', ')}, not ${body.quantization}`, 'quantization');
  }
  const given = body.input;
  if (typeof given !== 'string' && given.some((item) => typeof item !== 'string')) {
    fail("input as token ids is not supported: send the text (token ids are particular to each model's tokenizer)", 'input');
  }
  const inputs = typeof given === 'string' ? [given] : (given as string[]);
  // As for chat (MAX_PROMPT_BYTES_PER_TOKEN): an input that cannot fit by its size alone is
  // refused before a replica tokenizes it.
  const limit = model.context_window * MAX_INPUT_BYTES_PER_TOKEN;
  inputs.forEach((text, i) => {
    const param = typeof body.input === 'string' ? 'input' : `input[${i}]`;
    if (text.length === 0) fail('input strings must not be empty', param);
    const bytes = text.length * 3 > limit ? Buffer.byteLength(text) : 0; // at most 3 bytes per UTF-16 unit
    if (bytes > limit) {
      throw new ApiError('invalid_request', `${param} is ${bytes} bytes; ${model.id}'s context window of ${model.context_window} tokens holds at most ${limit} (${MAX_INPUT_BYTES_PER_TOKEN} bytes a token)`, { param, code: 'context_length_exceeded' });
    }
  });
  let dimensions: number | null = null;
  if (body.dimensions !== undefined && model.matryoshka === true) {
    const full = model.dimensions!;
    if (body.dimensions > full) fail(`model ${model.id} has ${full} dimensions; dimensions must be at most that`, 'dimensions');
    if (body.dimensions < full) dimensions = body.dimensions;
  }
  return { inputs, dimensions };
}

/** Consecutive slices of at most `size`, with the index of each slice's first item. */
export function batches<T>(items: readonly T[], size: number = EMBEDDING_BATCH_SIZE): Array<{ offset: number; items: T[] }> {
  const out: Array<{ offset: number; items: T[] }> = [];
  for (let offset = 0; offset < items.length; offset += size) out.push({ offset, items: items.slice(offset, offset + size) });
  return out;
}

/** The first `dimensions` components, scaled back to unit length (Matryoshka truncation). */
export function truncateAndNormalise(vector: readonly number[], dimensions: number): number[] {
  const cut = vector.slice(0, dimensions);
  let sum = 0;
  for (const x of cut) sum += x * x;
  const norm = Math.sqrt(sum);
  return norm === 0 ? cut : cut.map((x) => x / norm);
}

/** Raw little-endian float32 bytes, base64-encoded (what OpenAI's `base64` format is). */
export function encodeBase64Float32(vector: readonly number[]): string {
  const buffer = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) buffer.writeFloatLE(vector[i]!, i * 4);
  return buffer.toString('base64');
}

export function decodeBase64Float32(encoded: string): number[] {
  const buffer = Buffer.from(encoded, 'base64');
  const out: number[] = [];
  for (let i = 0; i + 4 <= buffer.length; i += 4) out.push(buffer.readFloatLE(i));
  return out;
}
