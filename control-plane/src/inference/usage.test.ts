import { describe, expect, it } from 'vitest';
import type { RateCard } from '../models/catalog.js';
import { costNanos, normaliseUsage } from './usage.js';

const card: RateCard = {
  id: 'rc',
  currency: 'usd',
  prices: { fp16: { input_per_million_tokens: 0.2, output_per_million_tokens: 0.6 }, int4: { input_per_million_tokens: 0.006, output_per_million_tokens: 0 } },
};

describe('costNanos', () => {
  it.each([
    ['fp16', 1_000_000, 0, 200_000_000], // $0.20 for a million prompt tokens
    ['fp16', 0, 1_000_000, 600_000_000],
    ['fp16', 10, 20, 14_000], // 10 x 200 + 20 x 600 nano-dollars
    ['int4', 1, 0, 6],
    ['int4', 1000, 1000, 6000], // output is free on this card
    ['fp8', 1000, 1000, 0], // no price for the variant: nothing to charge
  ] as const)('%s: %i prompt + %i completion tokens cost %i nano-dollars', (q, prompt, completion, expected) => {
    expect(costNanos(card, q, prompt, completion)).toBe(expected);
  });
});

describe('normaliseUsage', () => {
  it('keeps counts, recomputes the total, and refuses what is not usage', () => {
    expect(normaliseUsage({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 99 })).toEqual({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
    expect(normaliseUsage({ prompt_tokens: -1, completion_tokens: 'x' })).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
    expect(normaliseUsage(null)).toBeNull();
    expect(normaliseUsage(undefined)).toBeNull();
  });
});
