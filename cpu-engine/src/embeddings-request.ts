// POST /v1/embeddings bodies: validation and the response's vectors
// (L2-normalised, optionally packed as base64 float32 like OpenAI's).
// `dimensions` and `user` are accepted and ignored: truncation for Matryoshka
// models is the control plane's business (DESIGN.md section 4).
import { ApiError } from '../../shared/src/errors.js';
import { isObject, requireModel } from './chat-request.js';

export const MAX_EMBEDDING_INPUTS = 2048;

export interface EmbeddingsRequest {
  model: string;
  inputs: string[];
  encoding: 'float' | 'base64';
}

export function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest {
  if (!isObject(body)) throw new ApiError('invalid_request', 'the request body must be a JSON object');
  const model = requireModel(body);
  const input = body.input;
  let inputs: string[];
  if (typeof input === 'string') inputs = [input];
  else if (Array.isArray(input) && input.length > 0 && input.length <= MAX_EMBEDDING_INPUTS) {
    inputs = input.map((s, i) => {
      if (typeof s !== 'string') throw new ApiError('invalid_request', `input[${i}] must be a string`, { param: `input[${i}]` });
      return s;
    });
  } else {
    throw new ApiError('invalid_request', `input must be a string or an array of 1 to ${MAX_EMBEDDING_INPUTS} strings`, { param: 'input' });
  }
  // A single string is input[0] too, so every per-input error names input[<i>].
  inputs.forEach((s, i) => {
    if (s.length === 0) throw new ApiError('invalid_request', `input[${i}] must not be empty`, { param: `input[${i}]` });
  });
  const encoding = body.encoding_format ?? 'float';
  if (encoding !== 'float' && encoding !== 'base64') {
    throw new ApiError('invalid_request', 'encoding_format must be "float" or "base64"', { param: 'encoding_format' });
  }
  return { model, inputs, encoding };
}

/** The vector scaled to unit length (a zero vector stays zero). */
export function l2Normalize(vector: readonly number[]): number[] {
  let sum = 0;
  for (const x of vector) sum += x * x;
  const norm = Math.sqrt(sum);
  return norm === 0 ? [...vector] : vector.map((x) => x / norm);
}

/** OpenAI's base64 encoding: the float32 values, little-endian, base64. */
export function toBase64Float32(vector: readonly number[]): string {
  const buf = Buffer.alloc(vector.length * 4);
  vector.forEach((x, i) => buf.writeFloatLE(x, i * 4));
  return buf.toString('base64');
}

export function embeddingsResponse(model: string, vectors: number[][], encoding: 'float' | 'base64', promptTokens: number) {
  return {
    object: 'list' as const,
    model,
    data: vectors.map((v, index) => ({
      object: 'embedding' as const,
      index,
      embedding: encoding === 'base64' ? toBase64Float32(v) : v,
    })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
