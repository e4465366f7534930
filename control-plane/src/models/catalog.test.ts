import { describe, expect, it } from 'vitest';
import { catalogProblems, cheapestQuantization, loadCatalog, parseCatalog } from './catalog.js';

describe('the shipped model catalog', () => {
  const catalog = loadCatalog();

  it('holds the four embedding models of the spec with their dimensions and contexts', () => {
    const embeddings = catalog.models.filter((m) => m.kind === 'embedding');
    const shape = embeddings.map((m) => [m.dimensions, m.context_window]).sort();
    expect(shape).toEqual([[1024, 512], [1024, 8192], [1024, 8192], [768, 8192]].sort());
    expect(embeddings.some((m) => m.matryoshka)).toBe(true);
  });

  it('has chat models, rate cards for every variant and a scheduled deprecation', () => {
    expect(catalog.models.filter((m) => m.kind === 'chat').length).toBeGreaterThanOrEqual(3);
    expect(catalogProblems(catalog)).toEqual([]);
    expect(catalog.models.some((m) => m.deprecation)).toBe(true);
  });

  it('picks the cheapest variant as the default quantization', () => {
    const model = catalog.models.find((m) => m.id === 'llama-3.1-8b-instruct')!;
    const card = catalog.rate_cards.find((c) => c.id === model.rate_card_id)!;
    expect(cheapestQuantization(model, card)).toBe('int4');
  });
});

describe('catalog validation', () => {
  const base = loadCatalog();

  it('names the problem and where it is', () => {
    const broken = structuredClone(base) as unknown as { models: Array<Record<string, unknown>> };
    broken.models[0]!.context_window = 'big';
    expect(() => parseCatalog(broken, 'x.json')).toThrow(/x\.json is invalid at \/models\/0\/context_window/);
  });

  it('catches dangling references', () => {
    const broken = structuredClone(base);
    broken.models[0]!.rate_card_id = 'nope';
    broken.models[1]!.deprecation = { announced_at: '2026-01-01T00:00:00Z', shutdown_at: 'soon', replacement: 'ghost' };
    const problems = catalogProblems(broken);
    expect(problems.join('\n')).toMatch(/unknown rate card nope/);
    expect(problems.join('\n')).toMatch(/shutdown_at is not RFC 3339/);
    expect(problems.join('\n')).toMatch(/replacement ghost is not in the catalog/);
  });
});
