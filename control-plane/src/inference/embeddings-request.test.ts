import { describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import type { CatalogModel } from '../models/catalog.js';
import { batches, decodeBase64Float32, encodeBase64Float32, planEmbeddings, truncateAndNormalise } from './embeddings-request.js';

const matryoshka: CatalogModel = {
  id: 'tiny-embed',
  kind: 'embedding',
  created: 0,
  owned_by: 'svc',
  family: 'tiny',
  context_window: 512,
  dimensions: 128,
  matryoshka: true,
  quantizations: ['fp16'],
  rate_card_id: 'rc',
  serving: { engine: 'cpu', image: 'engine:1', gpus: 0, weights: {} },
};
const plain: CatalogModel = { ...matryoshka, id: 'plain', matryoshka: false };

function paramOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err.param;
    throw err;
  }
  return 'no error';
}

describe('planEmbeddings', () => {
  it('takes a single string or a list, in order', () => {
    expect(planEmbeddings({ model: 'tiny-embed', input: 'a' }, matryoshka).inputs).toEqual(['a']);
    expect(planEmbeddings({ model: 'tiny-embed', input: ['a', 'b'] }, matryoshka).inputs).toEqual(['a', 'b']);
  });

  it('refuses, before any replica tokenizes it, an input of more bytes than 16 per token of the context window', () => {
    const limit = plain.context_window * 16;
    expect(paramOf(() => planEmbeddings({ model: 'plain', input: ['a', 'b'.repeat(limit)] }, plain))).toBe('no error');
    expect(paramOf(() => planEmbeddings({ model: 'plain', input: ['a', 'b'.repeat(limit + 1)] }, plain))).toBe('input[1]');
    expect(paramOf(() => planEmbeddings({ model: 'plain', input: 'é'.repeat(limit / 2 + 1) }, plain))).toBe('input');
    try {
      planEmbeddings({ model: 'plain', input: 'b'.repeat(limit + 1) }, plain);
    } catch (err) {
      expect((err as ApiError).code).toBe('context_length_exceeded');
    }
  });

  it('truncates Matryoshka models only, and refuses more dimensions than the model has', () => {
    expect(planEmbeddings({ model: 'x', input: 'a', dimensions: 32 }, matryoshka).dimensions).toBe(32);
    expect(planEmbeddings({ model: 'x', input: 'a', dimensions: 128 }, matryoshka).dimensions).toBeNull();
    expect(planEmbeddings({ model: 'x', input: 'a', dimensions: 32 }, plain).dimensions).toBeNull();
    expect(paramOf(() => planEmbeddings({ model: 'x', input: 'a', dimensions: 129 }, matryoshka))).toBe('dimensions');
  });

  it('names the empty input, a chat model and a missing quantization', () => {
    expect(paramOf(() => planEmbeddings({ model: 'x', input: ['a', ''] }, matryoshka))).toBe('input[1]');
    expect(paramOf(() => planEmbeddings({ model: 'x', input: '' }, matryoshka))).toBe('input');
    expect(paramOf(() => planEmbeddings({ model: 'x', input: 'a' }, { ...matryoshka, kind: 'chat' }))).toBe('model');
    expect(paramOf(() => planEmbeddings({ model: 'x', input: 'a', quantization: 'int4' }, matryoshka))).toBe('quantization');
  });
});

describe('batches', () => {
  it('slices 130 inputs into 64 + 64 + 2 with their offsets', () => {
    const items = Array.from({ length: 130 }, (_, i) => i);
    const out = batches(items, 64);
    expect(out.map((b) => [b.offset, b.items.length])).toEqual([[0, 64], [64, 64], [128, 2]]);
    expect(out.flatMap((b) => b.items)).toEqual(items);
  });
});

describe('vectors', () => {
  it('truncation keeps the leading components and re-normalises to unit length', () => {
    const v = truncateAndNormalise([3, 4, 12], 2);
    expect(v[0]).toBeCloseTo(0.6);
    expect(v[1]).toBeCloseTo(0.8);
    expect(truncateAndNormalise([0, 0, 1], 2)).toEqual([0, 0]);
  });

  it('base64 is little-endian float32 and round-trips', () => {
    const v = [1, -2.5, 0.1];
    const encoded = encodeBase64Float32(v);
    expect(Buffer.from(encoded, 'base64').subarray(0, 4)).toEqual(Buffer.from([0x00, 0x00, 0x80, 0x3f]));
    const back = decodeBase64Float32(encoded);
    expect(back[0]).toBe(1);
    expect(back[1]).toBe(-2.5);
    expect(back[2]).toBeCloseTo(0.1, 6);
  });
});
