import { describe, expect, it } from 'vitest';
import { catalogProblems, loadCatalog, parseCatalog, quantizationsByPrice } from './catalog.js';

describe('the shipped model catalog', () => {
  const catalog = loadCatalog();

  it('holds the four embedding models of the spec with their dimensions and contexts', () => {
    // GPU-served (vLLM) models are the product; tiny-embed is the CPU engine's dev/test model.
    const embeddings = catalog.models.filter((m) => m.kind === 'embedding' && m.serving.engine === 'vllm');
    const shape = embeddings.map((m) => [m.dimensions, m.context_window]).sort();
    expect(shape).toEqual([[1024, 512], [1024, 8192], [1024, 8192], [768, 8192]].sort());
    expect(embeddings.some((m) => m.matryoshka)).toBe(true);
  });

  it('has chat models, rate cards for every variant and a scheduled deprecation', () => {
    expect(catalog.models.filter((m) => m.kind === 'chat').length).toBeGreaterThanOrEqual(3);
    expect(catalogProblems(catalog)).toEqual([]);
    expect(catalog.models.some((m) => m.deprecation)).toBe(true);
  });

  it('has the two tiny CPU-engine models with GGUF weights per variant, int4 cheapest', () => {
    for (const id of ['tiny-chat', 'tiny-embed']) {
      const model = catalog.models.find((m) => m.id === id)!;
      // The contexts the GGUF files were written with (cpu-engine/models).
      expect(model).toMatchObject({ family: 'tiny', context_window: id === 'tiny-chat' ? 2048 : 512, quantizations: ['fp16', 'fp8', 'int4'] });
      expect(model.serving).toMatchObject({ engine: 'cpu', image: '127.0.0.1:5000/svc/cpu-engine:3', gpus: 0 });
      expect(model.serving.weights.int4!.path).toBe(`/models/${id}-q4_0.gguf`);
      expect(quantizationsByPrice(model, catalog.rate_cards.find((c) => c.id === model.rate_card_id)!)[0]).toBe('int4');
    }
    expect(catalog.models.find((m) => m.id === 'tiny-embed')).toMatchObject({ kind: 'embedding', dimensions: 128, matryoshka: true });
  });

  it('picks the cheapest variant as the default quantization', () => {
    const model = catalog.models.find((m) => m.id === 'llama-3.1-8b-instruct')!;
    const card = catalog.rate_cards.find((c) => c.id === model.rate_card_id)!;
    expect(quantizationsByPrice(model, card)[0]).toBe('int4');
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

  it('holds serving blocks to the model: weights per variant, engine rules', () => {
    const broken = structuredClone(base);
    const llama = broken.models.find((m) => m.id === 'llama-3.1-8b-instruct')!;
    delete llama.serving.weights.int4!.method;
    delete llama.serving.weights.fp8;
    const tiny = broken.models.find((m) => m.id === 'tiny-chat')!;
    tiny.serving.gpus = 1;
    tiny.serving.weights.fp16!.method = 'awq';
    tiny.serving.image = 'Not An Image';
    const problems = catalogProblems(broken).join('\n');
    expect(problems).toMatch(/llama-3.1-8b-instruct: serving.weights has fp16, int4; it must have exactly the model's quantizations \(fp16, fp8, int4\)/);
    expect(problems).toMatch(/llama-3.1-8b-instruct: serving.weights.int4 needs method awq or gptq/);
    expect(problems).toMatch(/tiny-chat: serving.gpus must be 0 for the cpu engine/);
    expect(problems).toMatch(/tiny-chat: serving.weights.fp16.method applies only to vllm int4 weights/);
    expect(problems).toMatch(/tiny-chat: serving.image: "Not An Image" is not a valid OCI image reference/);
  });
});
