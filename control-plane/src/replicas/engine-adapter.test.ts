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
    args: ['--enable-auto-tool-choice', '--tool-call-parser', 'llama3_json'],
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
    image: '127.0.0.1:5000/svc/cpu-engine:3',
    gpus: 0,
    weights: { fp16: { path: '/models/t-f16.gguf' }, fp8: { path: '/models/t-q8_0.gguf' }, int4: { path: '/models/t-q4_0.gguf' } },
  },
});

const VLLM_HEAD = (path: string, id: string) => ['--model', path, '--served-model-name', id, '--host', '0.0.0.0', '--port', '8000'];
const GUIDED = ['--structured-outputs-config', '{"backend":"guidance"}'];
const LLAMA_TOOLS = ['--enable-auto-tool-choice', '--tool-call-parser', 'llama3_json'];

describe('modelServerSpec', () => {
  const cases: Array<[string, CatalogModel, Quantization, string[]]> = [
    ['vllm fp16', llama, 'fp16', [...VLLM_HEAD('meta/llama', 'llama-8b'), '--dtype', 'float16', '--max-model-len', '4096', ...GUIDED, ...LLAMA_TOOLS]],
    ['vllm fp8', llama, 'fp8', [...VLLM_HEAD('meta/llama', 'llama-8b'), '--quantization', 'fp8', '--max-model-len', '4096', ...GUIDED, ...LLAMA_TOOLS]],
    ['vllm int4 (AWQ checkpoint)', llama, 'int4', [...VLLM_HEAD('hq/llama-awq', 'llama-8b'), '--quantization', 'awq', '--max-model-len', '4096', ...GUIDED, ...LLAMA_TOOLS]],
    ['vllm int4 (GPTQ) on 4 GPUs', big, 'int4', [...VLLM_HEAD('q/llama-70b-gptq', 'llama-70b'), '--quantization', 'gptq', '--max-model-len', '4096', ...GUIDED, '--tensor-parallel-size', '4']],
    ['vllm embedding', embed, 'fp16', [...VLLM_HEAD('BAAI/bge', 'bge'), '--dtype', 'float16', '--max-model-len', '4096', '--task', 'embed']],
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

  it('refuses catalog args that repeat a flag derived from the catalog (the context window has one source)', () => {
    const twice = { ...llama, serving: { ...llama.serving, args: ['--max-model-len=32768'] } };
    expect(() => modelServerSpec(twice, 'fp16', { cpuThreads: 1 }, 'k')).toThrow(/may not set --max-model-len=32768/);
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

/**
 * Every catalog model's engine arguments, held here so a catalog edit that changes how a
 * model is served (its tool-call parser, its context, its quantization flags) shows up as
 * a diff of this table. The parsers are vLLM's for each family's tool-call format:
 * Llama 3.x emits JSON calls (llama3_json), Qwen2.5 Hermes-style <tool_call> tags
 * (hermes), Mistral v0.3 [TOOL_CALLS] (mistral, with Mistral's own tokenizer).
 */
describe('the catalog models engine arguments', () => {
  const catalog = loadCatalog();
  const head = (id: string, path: string) => VLLM_HEAD(path, id);
  const fp16 = ['--dtype', 'float16'];
  const fp8 = ['--quantization', 'fp8'];
  const awq = ['--quantization', 'awq'];
  const gptq = ['--quantization', 'gptq'];
  const len = (n: number) => ['--max-model-len', String(n)];
  const embed = ['--task', 'embed'];
  const tools = (parser: string) => ['--enable-auto-tool-choice', '--tool-call-parser', parser];
  const cpu = (id: string, file: string, task: string, ctx: number) =>
    ['--model', `/models/${file}`, '--served-model-name', id, '--task', task, '--host', '0.0.0.0', '--port', '8000', '--threads', '2', '--ctx-size', String(ctx)];
  const L31 = 'meta-llama/Llama-3.1-8B-Instruct';
  const L33 = 'meta-llama/Llama-3.3-70B-Instruct';
  const expected: Record<string, Partial<Record<Quantization, string[]>>> = {
    'bge-large-en-v1.5': {
      fp16: [...head('bge-large-en-v1.5', 'BAAI/bge-large-en-v1.5'), ...fp16, ...len(512), ...embed],
      fp8: [...head('bge-large-en-v1.5', 'BAAI/bge-large-en-v1.5'), ...fp8, ...len(512), ...embed],
    },
    'bge-m3': {
      fp16: [...head('bge-m3', 'BAAI/bge-m3'), ...fp16, ...len(8192), ...embed],
      fp8: [...head('bge-m3', 'BAAI/bge-m3'), ...fp8, ...len(8192), ...embed],
    },
    'nomic-embed-text-v1.5': {
      fp16: [...head('nomic-embed-text-v1.5', 'nomic-ai/nomic-embed-text-v1.5'), ...fp16, ...len(8192), ...embed, '--trust-remote-code'],
      fp8: [...head('nomic-embed-text-v1.5', 'nomic-ai/nomic-embed-text-v1.5'), ...fp8, ...len(8192), ...embed, '--trust-remote-code'],
      int4: [...head('nomic-embed-text-v1.5', 'nomic-ai/nomic-embed-text-v1.5-GPTQ-4bit'), ...gptq, ...len(8192), ...embed, '--trust-remote-code'],
    },
    'snowflake-arctic-embed-l-v2.0': {
      fp16: [...head('snowflake-arctic-embed-l-v2.0', 'Snowflake/snowflake-arctic-embed-l-v2.0'), ...fp16, ...len(8192), ...embed],
      fp8: [...head('snowflake-arctic-embed-l-v2.0', 'Snowflake/snowflake-arctic-embed-l-v2.0'), ...fp8, ...len(8192), ...embed],
    },
    'llama-3.1-8b-instruct': {
      fp16: [...head('llama-3.1-8b-instruct', L31), ...fp16, ...len(131072), ...GUIDED, ...tools('llama3_json')],
      fp8: [...head('llama-3.1-8b-instruct', L31), ...fp8, ...len(131072), ...GUIDED, ...tools('llama3_json')],
      int4: [...head('llama-3.1-8b-instruct', 'hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4'), ...awq, ...len(131072), ...GUIDED, ...tools('llama3_json')],
    },
    'llama-3.3-70b-instruct': {
      fp16: [...head('llama-3.3-70b-instruct', L33), ...fp16, ...len(131072), ...GUIDED, '--tensor-parallel-size', '4', ...tools('llama3_json')],
      fp8: [...head('llama-3.3-70b-instruct', L33), ...fp8, ...len(131072), ...GUIDED, '--tensor-parallel-size', '4', ...tools('llama3_json')],
      int4: [...head('llama-3.3-70b-instruct', 'casperhansen/llama-3.3-70b-instruct-awq'), ...awq, ...len(131072), ...GUIDED, '--tensor-parallel-size', '4', ...tools('llama3_json')],
    },
    'qwen2.5-7b-instruct': {
      fp16: [...head('qwen2.5-7b-instruct', 'Qwen/Qwen2.5-7B-Instruct'), ...fp16, ...len(32768), ...GUIDED, ...tools('hermes')],
      int4: [...head('qwen2.5-7b-instruct', 'Qwen/Qwen2.5-7B-Instruct-AWQ'), ...awq, ...len(32768), ...GUIDED, ...tools('hermes')],
    },
    'mistral-7b-instruct-v0.3': {
      fp16: [...head('mistral-7b-instruct-v0.3', 'mistralai/Mistral-7B-Instruct-v0.3'), ...fp16, ...len(32768), ...GUIDED, '--tokenizer-mode', 'mistral', ...tools('mistral')],
      int4: [...head('mistral-7b-instruct-v0.3', 'solidrust/Mistral-7B-Instruct-v0.3-AWQ'), ...awq, ...len(32768), ...GUIDED, '--tokenizer-mode', 'mistral', ...tools('mistral')],
    },
    'tiny-chat': {
      fp16: cpu('tiny-chat', 'tiny-chat-f16.gguf', 'generate', 2048),
      fp8: cpu('tiny-chat', 'tiny-chat-q8_0.gguf', 'generate', 2048),
      int4: cpu('tiny-chat', 'tiny-chat-q4_0.gguf', 'generate', 2048),
    },
    'tiny-embed': {
      fp16: cpu('tiny-embed', 'tiny-embed-f16.gguf', 'embed', 512),
      fp8: cpu('tiny-embed', 'tiny-embed-q8_0.gguf', 'embed', 512),
      int4: cpu('tiny-embed', 'tiny-embed-q4_0.gguf', 'embed', 512),
    },
  };

  it('lists every catalog model and variant', () => {
    const listed = Object.entries(expected).flatMap(([id, byQ]) => Object.keys(byQ).map((q) => `${id} ${q}`));
    expect(catalog.models.flatMap((m) => m.quantizations.map((q) => `${m.id} ${q}`)).sort()).toEqual(listed.sort());
  });

  it.each(catalog.models.flatMap((m) => m.quantizations.map((q) => [m.id, q, m] as const)))('%s %s', (id, quantization, model) => {
    expect(modelServerSpec(model, quantization, { cpuThreads: 2 }, 'k').args).toEqual(expected[id]![quantization]);
  });

  it('starts every vLLM chat model with a tool-call parser and auto tool choice, and every model with the context the catalog promises', () => {
    for (const model of catalog.models) {
      const args = modelServerSpec(model, model.quantizations[0]!, { cpuThreads: 2 }, 'k').args;
      const context = model.serving.engine === 'vllm' ? '--max-model-len' : '--ctx-size';
      expect(args[args.indexOf(context) + 1], model.id).toBe(String(model.context_window));
      if (model.serving.engine === 'vllm' && model.kind === 'chat') {
        expect(args, model.id).toContain('--enable-auto-tool-choice');
        expect(args[args.indexOf('--tool-call-parser') + 1], model.id).toMatch(/^(llama3_json|hermes|mistral)$/);
      }
    }
  });
});
