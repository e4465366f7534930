import { describe, expect, it } from 'vitest';
import { ApiError } from '../../shared/src/errors.js';
import { embeddingsResponse, l2Normalize, parseEmbeddingsRequest, toBase64Float32 } from './embeddings-request.js';

function paramOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError && err.status === 400) return err.param;
    throw err;
  }
  throw new Error('expected a 400');
}

describe('parseEmbeddingsRequest', () => {
  it('takes a string or an array of strings, in order', () => {
    expect(parseEmbeddingsRequest({ model: 'e', input: 'one' })).toEqual({ model: 'e', inputs: ['one'], encoding: 'float' });
    expect(parseEmbeddingsRequest({ model: 'e', input: ['a', 'b'], encoding_format: 'base64', dimensions: 64, user: 'u' }))
      .toEqual({ model: 'e', inputs: ['a', 'b'], encoding: 'base64' });
  });

  it('names the offending param', () => {
    expect(paramOf(() => parseEmbeddingsRequest({ input: 'x' }))).toBe('model');
    expect(paramOf(() => parseEmbeddingsRequest({ model: 'e' }))).toBe('input');
    expect(paramOf(() => parseEmbeddingsRequest({ model: 'e', input: [] }))).toBe('input');
    expect(paramOf(() => parseEmbeddingsRequest({ model: 'e', input: new Array(2049).fill('x') }))).toBe('input');
    expect(paramOf(() => parseEmbeddingsRequest({ model: 'e', input: ['ok', 3] }))).toBe('input[1]');
    expect(paramOf(() => parseEmbeddingsRequest({ model: 'e', input: ['ok', ''] }))).toBe('input[1]');
    expect(paramOf(() => parseEmbeddingsRequest({ model: 'e', input: '' }))).toBe('input[0]');
    expect(paramOf(() => parseEmbeddingsRequest({ model: 'e', input: 'x', encoding_format: 'hex' }))).toBe('encoding_format');
    expect(paramOf(() => parseEmbeddingsRequest('input'))).toBeUndefined();
  });
});

describe('embedding vectors', () => {
  it('are scaled to unit length', () => {
    expect(l2Normalize([3, 4])).toEqual([0.6, 0.8]);
    expect(l2Normalize([0, 0])).toEqual([0, 0]);
  });

  it('pack as little-endian float32 in base64', () => {
    const b64 = toBase64Float32([1, -0.5]);
    const buf = Buffer.from(b64, 'base64');
    expect([buf.readFloatLE(0), buf.readFloatLE(4)]).toEqual([1, -0.5]);
  });

  it('come back in the OpenAI list shape with usage', () => {
    expect(embeddingsResponse('e', [[1, 0], [0, 1]], 'float', 7)).toEqual({
      object: 'list',
      model: 'e',
      data: [
        { object: 'embedding', index: 0, embedding: [1, 0] },
        { object: 'embedding', index: 1, embedding: [0, 1] },
      ],
      usage: { prompt_tokens: 7, total_tokens: 7 },
    });
    expect(embeddingsResponse('e', [[1]], 'base64', 1).data[0]!.embedding).toBe(toBase64Float32([1]));
  });
});
