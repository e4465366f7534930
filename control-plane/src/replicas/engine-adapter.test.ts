import { describe, expect, it } from 'vitest';
import type { CatalogModel, Quantization } from '../models/catalog.js';
import { loadCatalog } from '../models/catalog.js';
import { modelServerSpec, replicaApiKey } from './engine-adapter.js';

const base = { created: 0, owned_by: 'x', family: 'x', context_window: 4096, rate_card_id: 'rc' };
const llama: CatalogModel = {
  ...base,
  id: 'llama-8b',
  kind: 'chat',
  quantizations: ['fp16', 'fp8', 'int4'],
  serving: {
    engine: 'vllm',
    image: 'vllm/vllm-openai:v0.11.0',
    gpus: 1,
    args: ['--max-model-len', '32768'],
    weights: { fp16: { path: 'meta/llama' }, fp8: { path: 'meta/llama' }, int4: { path: 'hq/llama-awq', method: 'awq' } },
  },
};
const big: CatalogModel = {
  ...base,
  id: 'llama-70b',
  kind: 'chat',
  quantizations: ['int4'],
  serving: { engine: 'vllm', image: 'vllm/vllm-openai:v0.11.0', gpus: 4, weights: { int4: { path: 'q/llama-70b-gptq', method: 'gptq' } } },
};
const embed: CatalogModel = {
  ...base,
  id: 'bge',
  kind: 'embedding',
  dimensions: 1024,
  quantizations: ['fp16'],
  serving: { engine: 'vllm', image: 'vllm/vllm-openai:v0.11.0', gpus: 1, weights: { fp16: { path: 'BAAI/bge' } } },
};
const tiny = (kind: 'chat' | 'embedding'): CatalogModel => ({
  ...base,
  id: kind === 'chat' ? 'tiny-chat' : 'tiny-embed',
  kind,
  quantizations: ['fp16', 'fp8', 'int4'],
  serving: {
    engine: 'cpu',
    image: '127.0.0.1:5000/svc/cpu-engine:2',
    gpus: 0,
    weights: { fp16: { path: '/models/t-f16.gguf' }, fp8: { path: '/models/t-q8_0.gguf' }, int4: { path: '/models/t-q4_0.gguf' } },
  },
});

const VLLM_HEAD = (path: string, id: string) => ['--model', path, '--served-model-name', id, '--host', '0.0.0.0', '--port', '8000'];

describe('modelServerSpec', () => {
  const cases: Array<[string, CatalogModel, Quantization, string[]]> = [
    ['vllm fp16', llama, 'fp16', [...VLLM_HEAD('meta/llama', 'llama-8b'), '--dtype', 'float16', '--max-model-len', '32768']],
    ['vllm fp8', llama, 'fp8', [...VLLM_HEAD('meta/llama', 'llama-8b'), '--quantization', 'fp8', '--max-model-len', '32768']],
    ['vllm int4 (AWQ checkpoint)', llama, 'int4', [...VLLM_HEAD('hq/llama-awq', 'llama-8b'), '--quantization', 'awq', '--max-model-len', '32768']],
    ['vllm int4 (GPTQ) on 4 GPUs', big, 'int4', [...VLLM_HEAD('q/llama-70b-gptq', 'llama-70b'), '--quantization', 'gptq', '--tensor-parallel-size', '4']],
    ['vllm embedding', embed, 'fp16', [...VLLM_HEAD('BAAI/bge', 'bge'), '--dtype', 'float16', '--task', 'embed']],
    [
      'cpu chat int4',
      tiny('chat'),
      'int4',
      ['--model', '/models/t-q4_0.gguf', '--served-model-name', 'tiny-chat', '--task', 'generate', '--host', '0.0.0.0', '--port', '8000', '--threads', '3', '--ctx-size', '4096'],
    ],
    [
      'cpu embedding fp16',
      tiny('embedding'),
      'fp16',
      ['--model', '/models/t-f16.gguf', '--served-model-name', 'tiny-embed', '--task', 'embed', '--host', '0.0.0.0', '--port', '8000', '--threads', '3', '--ctx-size', '4096'],
    ],
  ];

  it.each(cases)('%s', (_name, model, quantization, args) => {
    const spec = modelServerSpec(model, quantization, { cpuThreads: 3 }, 'k_replica');
    expect(spec.args).toEqual(args);
    const env = model.serving.engine === 'vllm' ? { VLLM_API_KEY: 'k_replica' } : { SVC_ENGINE_API_KEY: 'k_replica' };
    expect(spec).toMatchObject({ image: model.serving.image, engine: model.serving.engine, containerPort: 8000, healthPath: '/health', gpus: model.serving.gpus, env });
  });

  it('gives every variant of every catalog model its key, in the environment and never on the command line', () => {
    const catalog = loadCatalog();
    const variants = catalog.models.flatMap((m) => m.quantizations.map((q) => [m, q] as const));
    expect(variants.length).toBeGreaterThan(5);
    for (const [model, quantization] of variants) {
      const key = `k_${model.id}_${quantization}`;
      const spec = modelServerSpec(model, quantization, { cpuThreads: 1 }, key);
      expect(replicaApiKey(spec), `${model.id} ${quantization}`).toBe(key);
      expect(Object.values(spec.env)).toEqual([key]);
      expect(spec.args.join(' ')).not.toContain(key);
    }
  });

  it('reads no key from a replica started without one', () => {
    expect(replicaApiKey({ engine: 'cpu', env: {} })).toBeUndefined();
    expect(replicaApiKey({ engine: 'vllm', env: { SVC_ENGINE_API_KEY: 'x' } })).toBeUndefined();
  });

  it('refuses to make a replica without a key', () => {
    expect(() => modelServerSpec(llama, 'fp16', { cpuThreads: 1 }, '')).toThrow(/needs an API key/);
  });

  it('refuses a quantization the model does not offer', () => {
    expect(() => modelServerSpec(embed, 'int4', { cpuThreads: 2 }, 'k')).toThrow(/bge is not offered in int4 \(it has fp16\)/);
  });
});
