// The engine's command line (vLLM-like; the replica manager builds it):
//   --model <path.gguf> --served-model-name <id> --task generate|embed
//   [--host 0.0.0.0] [--port 8000] [--threads 1] [--ctx-size N] [--parallel 4] [--api-key KEY]
//   [--token-timeout-ms 5000] [--max-grammar-ambiguity 64]
// Parsed once at start; a bad flag is a UsageError (main prints it, exits 2). The API key
// may instead come from SVC_ENGINE_API_KEY (as vLLM reads VLLM_API_KEY): the control plane
// passes it that way so it is not in the container's command line.

export type Task = 'generate' | 'embed';

export interface EngineConfig {
  model: string;
  /** The id clients put in `model`; defaults to the file name without `.gguf`. */
  servedModelName: string;
  task: Task;
  host: string;
  port: number;
  /**
   * llama.cpp compute threads. Default 1: ggml's threads spin-wait at every op
   * barrier, so on a busy 2-core host 2 threads made the tiny model 20-100x
   * slower than 1 (docs in cpu-engine/README.md). Raise it on dedicated cores.
   */
  threads: number;
  /** Tokens per sequence (prompt + completion); undefined: the model's training context. */
  ctxSize: number | undefined;
  /** Sequences generated concurrently; further requests wait in a queue. */
  parallel: number;
  /**
   * When set, every endpoint but /health requires `Authorization: Bearer <apiKey>`.
   * Unset: no authentication (a developer's `docker run`).
   */
  apiKey: string | undefined;
  /**
   * The watchdog's bound on one generated token (the first, which evaluates the prompt, gets
   * one more such bound per 512 prompt tokens): past it the request fails and /health answers
   * 503 until the evaluation under way returns.
   */
  tokenTimeoutMs: number;
  /** Schemas whose nested unions the grammar sampler would follow in more parses than this are refused (400). */
  maxGrammarAmbiguity: number;
}

export const DEFAULT_TOKEN_TIMEOUT_MS = 5_000;
export const DEFAULT_MAX_GRAMMAR_AMBIGUITY = 64;

/** Where the key may come from besides --api-key. */
export const API_KEY_ENV = 'SVC_ENGINE_API_KEY';

export class UsageError extends Error {
  override name = 'UsageError';
}

export const USAGE = `usage: cpu-engine --model <path.gguf> [--served-model-name <id>] [--task generate|embed]
                  [--host 0.0.0.0] [--port 8000] [--threads 1] [--ctx-size <tokens>] [--parallel 4]
                  [--api-key <key>]   (or the environment variable ${API_KEY_ENV})
                  [--token-timeout-ms ${DEFAULT_TOKEN_TIMEOUT_MS}] [--max-grammar-ambiguity ${DEFAULT_MAX_GRAMMAR_AMBIGUITY}]`;

const FLAGS = ['model', 'served-model-name', 'task', 'host', 'port', 'threads', 'ctx-size', 'parallel', 'api-key', 'token-timeout-ms', 'max-grammar-ambiguity'] as const;
type Flag = (typeof FLAGS)[number];

function integer(flag: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw)) throw new UsageError(`--${flag} must be a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw new UsageError(`--${flag} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/**
 * Returns the config, or 'help' for --help/-h. Throws UsageError on anything else that is
 * wrong. `env` supplies SVC_ENGINE_API_KEY; --api-key wins over it.
 */
export function parseArgs(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = {}): EngineConfig | 'help' {
  const seen = new Map<Flag, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') return 'help';
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf('=');
    const name = (eq >= 0 ? arg.slice(2, eq) : arg.slice(2)) as Flag;
    if (!FLAGS.includes(name)) throw new UsageError(`unknown flag --${name}`);
    if (seen.has(name)) throw new UsageError(`--${name} given twice`);
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      value = argv[i + 1];
      if (value === undefined || value.startsWith('--')) throw new UsageError(`--${name} needs a value`);
      i++;
    }
    if (value === '') throw new UsageError(`--${name} needs a value`);
    seen.set(name, value);
  }

  const model = seen.get('model');
  if (!model) throw new UsageError('--model <path.gguf> is required');
  const task = seen.get('task') ?? 'generate';
  if (task !== 'generate' && task !== 'embed') throw new UsageError(`--task must be generate or embed, got ${JSON.stringify(task)}`);
  const baseName = model.split('/').pop()!.replace(/\.gguf$/i, '');
  const ctx = seen.get('ctx-size');

  return {
    model,
    servedModelName: seen.get('served-model-name') ?? baseName,
    task,
    host: seen.get('host') ?? '0.0.0.0',
    port: integer('port', seen.get('port') ?? '8000', 0, 65535),
    threads: integer('threads', seen.get('threads') ?? '1', 1, 256),
    ctxSize: ctx === undefined ? undefined : integer('ctx-size', ctx, 16, 1 << 20),
    parallel: integer('parallel', seen.get('parallel') ?? '4', 1, 64),
    apiKey: seen.get('api-key') ?? (env[API_KEY_ENV] || undefined),
    tokenTimeoutMs: integer('token-timeout-ms', seen.get('token-timeout-ms') ?? String(DEFAULT_TOKEN_TIMEOUT_MS), 1, 3_600_000),
    maxGrammarAmbiguity: integer('max-grammar-ambiguity', seen.get('max-grammar-ambiguity') ?? String(DEFAULT_MAX_GRAMMAR_AMBIGUITY), 1, 1_000_000_000),
  };
}
