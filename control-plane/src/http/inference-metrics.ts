// Inference series of the public /metrics: requests by model, quantization, pool and
// status, tokens in and out, time to first token and request latency. Labels are bounded
// sets (catalog models, the three quantizations and pools, HTTP statuses): a model name a
// client made up is counted as "unknown", never as a label of its own.
import { Readable, Transform, pipeline } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import { Counter, Histogram, type Registry } from 'prom-client';
import { POOLS, QUANTIZATIONS } from '../models/catalog.js';
import type { ServedRequest, UsageContext } from '../inference/usage.js';

/** Seconds: from a cached CPU-engine answer (ms) to a long generation on a loaded GPU. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const TTFT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const UNKNOWN = 'unknown';
const NONE = 'none';

type Labels = { model: string; quantization: string; pool: string };

interface InFlight {
  /** Where the request was served, once the usage recorder saw it. */
  served?: Labels;
  /** Milliseconds from the request's arrival to the first byte of a streamed answer. */
  firstByteMs?: number;
}

/** A route option that may be one hook, several, or none. */
const asList = <T>(hooks: T | T[] | undefined): T[] => (hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks]);

export class InferenceMetrics {
  private readonly inFlight = new Map<string, InFlight>();
  private readonly requests: Counter<'endpoint' | 'model' | 'quantization' | 'pool' | 'status'>;
  private readonly inputTokens: Counter<'model' | 'quantization' | 'pool'>;
  private readonly outputTokens: Counter<'model' | 'quantization' | 'pool'>;
  private readonly duration: Histogram<'endpoint' | 'model' | 'quantization' | 'pool'>;
  private readonly ttft: Histogram<'model' | 'quantization' | 'pool'>;

  constructor(
    registry: Registry,
    private readonly knownModels: ReadonlySet<string>,
  ) {
    const registers = [registry];
    const where = ['model', 'quantization', 'pool'] as const;
    this.requests = new Counter({
      name: 'svc_inference_requests_total',
      help: 'Inference requests answered, by endpoint, model, quantization, pool and HTTP status (pool and quantization "none" when no replica was chosen).',
      labelNames: ['endpoint', ...where, 'status'],
      registers,
    });
    this.inputTokens = new Counter({ name: 'svc_inference_input_tokens_total', help: 'Prompt (input) tokens processed, by model, quantization and pool.', labelNames: where, registers });
    this.outputTokens = new Counter({ name: 'svc_inference_output_tokens_total', help: 'Completion (output) tokens generated, by model, quantization and pool.', labelNames: where, registers });
    this.duration = new Histogram({
      name: 'svc_inference_request_duration_seconds',
      help: 'Inference request latency, arrival to last byte, by endpoint, model, quantization and pool.',
      labelNames: ['endpoint', ...where],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.ttft = new Histogram({
      name: 'svc_inference_time_to_first_token_seconds',
      help: 'Streamed completions: arrival to the first streamed chunk, by model, quantization and pool.',
      labelNames: where,
      buckets: TTFT_BUCKETS,
      registers,
    });
  }

  /** The usage recorder's observer: tokens, and where the request was served. */
  served(ctx: UsageContext, served: ServedRequest): void {
    const labels = this.labelsOf(served.model, served.quantization, served.pool);
    this.inputTokens.inc(labels, served.usage.prompt_tokens);
    this.outputTokens.inc(labels, served.usage.completion_tokens);
    const entry = this.inFlight.get(ctx.requestId);
    if (entry) entry.served = labels;
  }

  /** Requests being answered now (their metrics are written when each closes). */
  get open(): number {
    return this.inFlight.size;
  }

  install(app: FastifyInstance): void {
    // Attached to the inference routes only (the POSTs needing inference:write: chat,
    // embeddings, responses; not deleting a stored response) as they are added: every other
    // request pays nothing, and no request builds `routeOptions` (a new object per read) to find out.
    app.addHook('onRoute', (route) => {
      if ((route.config as { scope?: string } | undefined)?.scope !== 'inference:write' || route.method !== 'POST') return;
      const endpoint = route.url;
      const track = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
        this.inFlight.set(request.id, {});
        // 'close', not onResponse: it also comes when the client leaves mid-stream, so no
        // entry outlives its request. A turn later, so a cut stream's usage record (written
        // as the relay unwinds) still names where it was served.
        reply.raw.once('close', () =>
          setImmediate(() => {
            const entry = this.inFlight.get(request.id);
            if (!entry) return;
            this.inFlight.delete(request.id);
            this.finished(request, reply, entry, endpoint);
          }),
        );
        done();
      };
      const timeStream = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, value?: unknown) => void): void => {
        const entry = this.inFlight.get(request.id);
        if (!entry || !(payload instanceof Readable)) return done(null, payload);
        done(
          null,
          timeFirstByte(payload, () => {
            entry.firstByteMs ??= reply.elapsedTime;
          }),
        );
      };
      route.onRequest = [...asList(route.onRequest), track] as RouteOptions['onRequest'];
      route.onSend = [...asList(route.onSend), timeStream] as RouteOptions['onSend'];
    });
  }

  private finished(request: FastifyRequest, reply: FastifyReply, entry: InFlight, endpoint: string): void {
    const labels = entry.served ?? this.requested(request);
    this.requests.inc({ endpoint, ...labels, status: String(reply.statusCode) });
    this.duration.observe({ endpoint, ...labels }, reply.elapsedTime / 1000);
    if (entry.served && entry.firstByteMs !== undefined) this.ttft.observe(labels, entry.firstByteMs / 1000);
  }

  /** A request no replica served (refused, no capacity): what it asked for, bounded. */
  private requested(request: FastifyRequest): Labels {
    const body = (request.body ?? {}) as { model?: unknown; quantization?: unknown };
    const pool = request.headers['x-service-pool'];
    return this.labelsOf(body.model, body.quantization ?? NONE, typeof pool === 'string' ? pool : NONE);
  }

  private labelsOf(model: unknown, quantization: unknown, pool: unknown): Labels {
    return {
      model: typeof model === 'string' && this.knownModels.has(model) ? model : UNKNOWN,
      quantization: (QUANTIZATIONS as readonly unknown[]).includes(quantization) ? (quantization as string) : NONE,
      pool: (POOLS as readonly unknown[]).includes(pool) ? (pool as string) : NONE,
    };
  }
}

/**
 * The same stream, noting its first chunk. `pipeline` ties both ends: a client that goes
 * away destroys the source too, so the relay's cancellation and billing still run.
 */
function timeFirstByte(source: Readable, onFirst: () => void): Readable {
  let first = true;
  const timed = new Transform({
    transform(chunk, _encoding, done) {
      if (first) {
        first = false;
        onFirst();
      }
      done(null, chunk);
    },
  });
  // Its only errors are a client gone (premature close) or a relay failure the relay framed itself.
  return pipeline(source, timed, () => {});
}
