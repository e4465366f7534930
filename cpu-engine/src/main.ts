// Entry point of the CPU engine image: parses the command line, listens, loads
// the model (GET /health turns 200), and on SIGTERM/SIGINT stops listening,
// lets in-flight requests finish for a moment, aborts the rest and exits 0.
import { existsSync } from 'node:fs';
import { parseArgs, USAGE, UsageError, type EngineConfig } from './args.js';
import { LlamaEngine } from './llama-engine.js';
import { createEngineServer } from './server.js';

/** In-flight requests get this long after SIGTERM before they are aborted. */
const SHUTDOWN_GRACE_MS = 1_500;

type Level = 'info' | 'warn' | 'error';

/** One JSON object per line on stdout, like the rest of the stack (pino's shape). */
function log(level: Level, msg: string, fields: Record<string, unknown> = {}): void {
  const levels: Record<Level, number> = { info: 30, warn: 40, error: 50 };
  process.stdout.write(`${JSON.stringify({ level: levels[level], time: Date.now(), name: 'cpu-engine', msg, ...fields })}\n`);
}

function fail(message: string, code: number): never {
  process.stderr.write(`cpu-engine: ${message}\n`);
  process.exit(code);
}

function config(): EngineConfig {
  try {
    const parsed = parseArgs(process.argv.slice(2), process.env);
    if (parsed === 'help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    return parsed;
  } catch (err) {
    if (err instanceof UsageError) fail(`${err.message} (--help shows the usage)`, 2);
    throw err;
  }
}

async function main(): Promise<void> {
  const cfg = config();
  if (!existsSync(cfg.model)) fail(`--model ${cfg.model}: no such file`, 2);

  const api = createEngineServer({ config: cfg, log });
  await new Promise<void>((resolve, reject) => {
    api.server.once('error', reject);
    api.server.listen(cfg.port, cfg.host, () => resolve());
  });
  const address = api.server.address();
  const port = typeof address === 'object' && address ? address.port : cfg.port;
  log('info', 'listening', { host: cfg.host, port, api_key: cfg.apiKey === undefined ? 'none: every endpoint is open' : 'required' });

  let engine: LlamaEngine | undefined;
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log('info', 'shutting down', { signal });
    await api.shutdown(SHUTDOWN_GRACE_MS);
    // The process exits next; releasing native memory first would only delay that.
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  const started = Date.now();
  try {
    engine = await LlamaEngine.load(cfg, log);
  } catch (err) {
    fail(`cannot load ${cfg.model}: ${(err as Error).message}`, 1);
  }
  if (stopping) return;
  api.ready(engine);
  log('info', 'model loaded', {
    model: cfg.model, served_model_name: cfg.servedModelName, task: cfg.task, context_size: engine.contextSize,
    threads: cfg.threads, parallel: cfg.parallel, load_ms: Date.now() - started,
  });
}

main().catch((err: unknown) => fail((err as Error)?.stack ?? String(err), 1));
