// Engine adapters: a catalog model and a quantization -> the model-server container the
// agent runs (image, arguments, env, the port it serves on, its health path, GPUs), as a
// pure function. vLLM serves GPU nodes, the project's CPU engine (GGUF over
// node-llama-cpp) serves development machines, CI and tests; the catalog names the engine.
// Every replica gets its own API key (the control plane's, never a tenant's): both engines
// then refuse every request without it but their health check.
import type { CatalogModel, Engine, Quantization } from '../models/catalog.js';

/** Every engine serves its OpenAI-compatible API on this port inside the container. */
export const MODEL_SERVER_PORT = 8000;
export const HEALTH_PATH = '/health';

export interface ModelServerSpec {
  engine: Engine;
  image: string;
  /** The container's command arguments (the image's entrypoint is the server). */
  args: string[];
  env: Record<string, string>;
  containerPort: number;
  healthPath: string;
  gpus: number;
}

/**
 * The environment variable each engine reads its API key from (vLLM's own VLLM_API_KEY is
 * its --api-key). The environment rather than a flag: a command line is in every replica
 * view and `svcctl replicas list`, and in `ps` for everyone on the host; the environment is
 * only in `docker inspect`, which is the provider's anyway.
 */
export const API_KEY_ENV: Record<Engine, string> = { vllm: 'VLLM_API_KEY', cpu: 'SVC_ENGINE_API_KEY' };

/** The API key a replica was started with (its env holds it), or undefined for a replica started without one. */
export function replicaApiKey(replica: { engine: Engine; env: Readonly<Record<string, string>> }): string | undefined {
  return replica.env[API_KEY_ENV[replica.engine]] || undefined;
}

export interface EngineOptions {
  /** CPU engine threads per replica (SVC_CPU_ENGINE_THREADS). */
  cpuThreads: number;
}

/**
 * vLLM's structured-output (guided decoding) backend, pinned rather than left to "auto"
 * so one backend enforces every schema (tool_choice "required" or named, response_format)
 * the same way; llguidance covers the widest JSON Schema and compiles a per-request schema
 * without a warm-up. The config-group spelling of vLLM >= 0.10.2.
 */
export const VLLM_STRUCTURED_OUTPUTS = ['--structured-outputs-config', '{"backend":"guidance"}'];

/** Flags whose value is derived from the catalog, so the catalog's `args` may not repeat them. */
const DERIVED_FLAGS = ['--max-model-len', '--ctx-size', '--model', '--served-model-name', '--port', '--host'];

const VLLM_QUANTIZATION_FLAGS: Record<Exclude<Quantization, 'int4'>, string[]> = {
  fp16: ['--dtype', 'float16'],
  fp8: ['--quantization', 'fp8'],
};

/** `apiKey`: the replica's own key, which the engine then requires on every call but /health. */
export function modelServerSpec(model: CatalogModel, quantization: Quantization, options: EngineOptions, apiKey: string): ModelServerSpec {
  if (!apiKey) throw new Error(`model ${model.id}: a replica needs an API key`);
  const serving = model.serving;
  const weights = serving.weights[quantization];
  if (!model.quantizations.includes(quantization) || !weights) {
    throw new Error(`model ${model.id} is not offered in ${quantization} (it has ${model.quantizations.join(', ')})`);
  }
  const repeated = (serving.args ?? []).find((a) => DERIVED_FLAGS.includes(a.split('=')[0]!));
  if (repeated) throw new Error(`model ${model.id}: serving.args may not set ${repeated}; it is derived from the catalog (context_window, weights, id)`);
  const common = ['--model', weights.path, '--served-model-name', model.id];
  const listen = ['--host', '0.0.0.0', '--port', String(MODEL_SERVER_PORT)];
  let args: string[];
  if (serving.engine === 'vllm') {
    let quantFlags: string[];
    if (quantization === 'int4') {
      // catalogProblems guarantees a method for vLLM int4 weights.
      if (!weights.method) throw new Error(`model ${model.id}: int4 weights need method awq or gptq`);
      quantFlags = ['--quantization', weights.method];
    } else {
      quantFlags = VLLM_QUANTIZATION_FLAGS[quantization];
    }
    args = [
      ...common,
      ...listen,
      ...quantFlags,
      // The catalog's context_window is what clients are promised (and what max_tokens is
      // checked against), so it is what the engine is started with: one source of truth.
      '--max-model-len',
      String(model.context_window),
      ...(model.kind === 'embedding' ? ['--task', 'embed'] : VLLM_STRUCTURED_OUTPUTS),
      ...(serving.gpus > 1 ? ['--tensor-parallel-size', String(serving.gpus)] : []),
    ];
  } else {
    // The GGUF file itself is the quantization (F16 / Q8_0 / Q4_0): no flag needed. The
    // context is the catalog's, so the engine refuses exactly what the catalog promises.
    args = [
      ...common,
      '--task',
      model.kind === 'embedding' ? 'embed' : 'generate',
      ...listen,
      '--threads',
      String(options.cpuThreads),
      '--ctx-size',
      String(model.context_window),
    ];
  }
  return {
    engine: serving.engine,
    image: serving.image,
    args: [...args, ...(serving.args ?? [])],
    env: { [API_KEY_ENV[serving.engine]]: apiKey },
    containerPort: MODEL_SERVER_PORT,
    healthPath: HEALTH_PATH,
    gpus: serving.gpus,
  };
}
