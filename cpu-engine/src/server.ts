// The engine's HTTP API on plain node:http (lean: the control plane's router
// adds its own latency on top of this one): /health, /v1/models,
// /v1/chat/completions (JSON or SSE) and /v1/embeddings, every error in the
// {error:{type,message,param?}} envelope; with an API key, all but /health
// require it (auth.ts). The model loads after listening, so
// /health answers 503 until it is ready.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { ApiError } from '../../shared/src/errors.js';
import type { EngineConfig } from './args.js';
import { authorized } from './auth.js';
import { completionBudget, parseChatRequest } from './chat-request.js';
import {
  chatCompletion, completionId, contentChunk, finishChunk, roleChunk, toolCallChunk, toolCallFrom, usage, usageChunk, type CompletionMeta,
} from './chat-response.js';
import { embeddingsResponse, l2Normalize, parseEmbeddingsRequest } from './embeddings-request.js';
import type { Engine } from './engine.js';
import { SSE_DONE, SSE_HEADERS, sseEvent } from './sse.js';

/** Large enough for 2,048 embedding inputs of a long-context model. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** Tokens generated without a chunk before a usage-only chunk reports them (continuous_usage_stats). */
export const USAGE_EVERY = 16;

/**
 * Characters one token may stand for, on average over a whole prompt, before the prompt is
 * refused without being rendered or tokenized: text runs about 4 characters a token, so a
 * prompt past 16 per token of context cannot fit, and tokenizing megabytes of it only to
 * refuse it had cost over a second per request, for free.
 */
export const MAX_CHARS_PER_TOKEN = 16;

export interface ServerOptions {
  config: Pick<EngineConfig, 'servedModelName' | 'task' | 'apiKey'>;
  log: (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;
  /** Unix seconds; injectable for tests. */
  now?: () => number;
}

export interface EngineServer {
  server: Server;
  /** Called once the model is loaded: /health turns 200. */
  ready(engine: Engine): void;
  /** Stops taking requests; in-flight ones get `graceMs` to finish, then are aborted. */
  shutdown(graceMs: number): Promise<void>;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, err: ApiError): void {
  sendJson(res, err.status, err.toBody());
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ApiError('payload_too_large', `the request body exceeds ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError('invalid_request', `the request body is not valid JSON: ${(err as Error).message}`);
  }
}

export function createEngineServer(options: ServerOptions): EngineServer {
  const { config, log } = options;
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const startedAt = now();
  let engine: Engine | undefined;
  let draining = false;
  /** Aborts for in-flight generations, so shutdown can cut them short. */
  const inFlight = new Set<AbortController>();

  function requireEngine(): Engine {
    if (draining) throw new ApiError('service_unavailable', 'the engine is shutting down');
    if (!engine) throw new ApiError('service_unavailable', 'the model is still loading; retry when GET /health answers 200');
    return engine;
  }

  function checkModel(model: string): void {
    if (model !== config.servedModelName) {
      throw new ApiError('model_not_found', `model ${JSON.stringify(model)} is not served here; this engine serves ${JSON.stringify(config.servedModelName)}`, { param: 'model' });
    }
  }

  /** An abort signal that fires when the client goes away before the response is complete. */
  function clientSignal(req: IncomingMessage, res: ServerResponse): AbortController {
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort(new Error('client disconnected'));
    });
    req.on('error', () => controller.abort(new Error('client connection failed')));
    return controller;
  }

  async function chat(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req);
    const request = parseChatRequest(body);
    checkModel(request.model);
    const eng = requireEngine();
    if (config.task !== 'generate') {
      throw new ApiError('invalid_request', `${config.servedModelName} is an embedding model; use POST /v1/embeddings`, { param: 'model' });
    }
    const chars = request.messages.reduce((n, m) => n + m.content.length + (m.tool_calls ? JSON.stringify(m.tool_calls).length : 0), 0);
    if (chars > eng.contextSize * MAX_CHARS_PER_TOKEN) {
      throw new ApiError('invalid_request', `the messages are ${chars} characters, more than ${MAX_CHARS_PER_TOKEN} per token of this model's ${eng.contextSize}-token context: they cannot fit`, { param: 'messages', code: 'context_length_exceeded' });
    }
    const prompt = eng.chatPrompt(request.messages);
    const promptTokens = prompt.tokens.length;
    const maxTokens = completionBudget(promptTokens, request.maxTokens, eng.contextSize);
    const sampling = {
      maxTokens, temperature: request.temperature, topP: request.topP, topK: request.topK, seed: request.seed, stop: request.stop,
      frequencyPenalty: request.frequencyPenalty, presencePenalty: request.presencePenalty, logitBias: request.logitBias, constraint: request.constraint,
    };
    // Before any byte of the answer: a schema the grammar cannot take is an ordinary 400.
    await eng.prepare(request.constraint);
    const forcedCall = request.constraint.kind === 'tool_call';
    const meta: CompletionMeta = { id: completionId(), created: now(), model: config.servedModelName };

    const controller = clientSignal(req, res);
    inFlight.add(controller);
    try {
      if (!request.stream) {
        let content = '';
        const result = await eng.generate(prompt, sampling, (text) => { content += text; }, controller.signal);
        if (result.finishReason === 'aborted') {
          if (!res.headersSent && !res.destroyed) sendError(res, new ApiError('service_unavailable', 'generation was cancelled: the engine is shutting down'));
          return;
        }
        const call = forcedCall ? toolCallFrom(content) : undefined;
        sendJson(res, 200, chatCompletion(meta, content, result.finishReason, usage(promptTokens, result.completionTokens), call));
        return;
      }

      res.writeHead(200, SSE_HEADERS);
      res.flushHeaders();
      const write = async (payload: string): Promise<void> => {
        if (res.destroyed) return;
        // Respect backpressure: a slow reader slows generation instead of growing a buffer.
        if (!res.write(payload)) await new Promise<void>((resolve) => { res.once('drain', resolve); res.once('close', resolve); });
      };
      // continuous_usage_stats: the usage so far on every chunk, so whoever bills a stream
      // that is cut short knows the prompt tokens this engine processed.
      const soFar = (completionTokens: number) => (request.continuousUsage ? usage(promptTokens, completionTokens) : undefined);
      // The role chunk, with the prompt tokens, once the prompt is evaluated (a slot held):
      // whoever bills a stream cut while it was still queued knows no prompt was processed.
      // (An engine that never says so has it sent before its first text or its end.)
      let started = false;
      const onStart = async () => {
        if (started) return;
        started = true;
        await write(sseEvent(roleChunk(meta, soFar(0))));
      };
      // A forced call is held back until complete, then sent as one tool_calls delta.
      let held = '';
      let reported = 0;
      const onText = forcedCall
        ? async (text: string) => { await onStart(); held += text; }
        : async (text: string, tokens: number) => {
          await onStart();
          reported = tokens;
          return write(sseEvent(contentChunk(meta, text, soFar(tokens))));
        };
      // While output is held back (a forced call, bytes of an unfinished character), a
      // usage-only chunk every USAGE_EVERY tokens: a stream cut meanwhile is billed what
      // was generated, not only the prompt.
      const onToken = request.continuousUsage
        ? async (tokens: number) => {
          await onStart();
          if (tokens - reported < USAGE_EVERY) return;
          reported = tokens;
          return write(sseEvent(usageChunk(meta, usage(promptTokens, tokens))));
        }
        : undefined;
      const result = await eng.generate(prompt, sampling, onText, controller.signal, onToken, onStart);
      if (result.finishReason !== 'aborted') {
        await onStart();
        const call = forcedCall ? toolCallFrom(held) : undefined;
        if (call) await write(sseEvent(toolCallChunk(meta, call, soFar(result.completionTokens))));
        else if (held) await write(sseEvent(contentChunk(meta, held, soFar(result.completionTokens))));
        await write(sseEvent(finishChunk(meta, call ? 'tool_calls' : result.finishReason, soFar(result.completionTokens))));
        if (request.includeUsage) await write(sseEvent(usageChunk(meta, usage(promptTokens, result.completionTokens))));
      } else if (!res.destroyed) {
        // Cut short by shutdown, not by the client: say so instead of a finish_reason.
        await write(sseEvent(new ApiError('service_unavailable', 'generation was cancelled: the engine is shutting down').toBody()));
      }
      res.end(SSE_DONE);
    } finally {
      inFlight.delete(controller);
    }
  }

  async function embeddings(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req);
    const request = parseEmbeddingsRequest(body);
    checkModel(request.model);
    const eng = requireEngine();
    if (config.task !== 'embed') {
      throw new ApiError('invalid_request', `${config.servedModelName} is a chat model; use POST /v1/chat/completions`, { param: 'model' });
    }
    let promptTokens = 0;
    request.inputs.forEach((input, i) => {
      if (input.length > eng.contextSize * MAX_CHARS_PER_TOKEN) {
        throw new ApiError('invalid_request', `input[${i}] is ${input.length} characters, more than ${MAX_CHARS_PER_TOKEN} per token of this model's ${eng.contextSize}-token context: it cannot fit`, { param: `input[${i}]`, code: 'context_length_exceeded' });
      }
    });
    request.inputs.forEach((input, i) => {
      const n = eng.embeddingTokens(input);
      if (n > eng.contextSize) {
        throw new ApiError('invalid_request', `input[${i}] is ${n} tokens; this model's context is ${eng.contextSize} tokens`, { param: `input[${i}]` });
      }
      promptTokens += n;
    });
    const controller = clientSignal(req, res);
    inFlight.add(controller);
    try {
      let vectors: number[][];
      try {
        vectors = await eng.embed(request.inputs, controller.signal);
      } catch (err) {
        if (!controller.signal.aborted) throw err;
        // Aborted while queued: by the client (nobody left to answer) or by shutdown.
        if (!res.destroyed) sendError(res, new ApiError('service_unavailable', 'the engine is shutting down'));
        return;
      }
      sendJson(res, 200, embeddingsResponse(config.servedModelName, vectors.map(l2Normalize), request.encoding, promptTokens));
    } finally {
      inFlight.delete(controller);
    }
  }

  const routes: Record<string, Record<string, (req: IncomingMessage, res: ServerResponse) => Promise<void> | void>> = {
    '/health': {
      GET: (_req, res) => {
        // Stalled: a token's evaluation ran past the watchdog's bound and holds the context
        // (every sequence waits for it); routing takes the replica out until it returns.
        if (engine && !draining && engine.isStalled?.()) sendJson(res, 503, { status: 'stalled' });
        else if (engine && !draining) sendJson(res, 200, { status: 'ok' });
        else sendJson(res, 503, { status: draining ? 'shutting_down' : 'loading' });
      },
    },
    '/v1/models': {
      GET: (_req, res) =>
        sendJson(res, 200, {
          object: 'list',
          data: [{
            id: config.servedModelName,
            object: 'model',
            created: startedAt,
            owned_by: 'svc-cpu-engine',
            ...(engine ? { max_model_len: engine.contextSize } : {}),
          }],
        }),
    },
    '/v1/chat/completions': { POST: chat },
    '/v1/embeddings': { POST: embeddings },
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    const route = routes[path];
    try {
      // Before anything else, unknown paths included: without the key nothing is revealed.
      if (!authorized(path, req.headers.authorization, config.apiKey)) {
        res.setHeader('www-authenticate', 'Bearer');
        throw new ApiError('unauthorized', 'this model server requires its API key: send Authorization: Bearer <key>');
      }
      if (!route) throw new ApiError('not_found', `no route ${req.method} ${path}`);
      const handler = route[req.method ?? ''];
      if (!handler) throw new ApiError('method_not_allowed', `${path} takes ${Object.keys(route).join(', ')}, not ${req.method}`);
      await handler(req, res);
    } catch (err) {
      const apiError = err instanceof ApiError ? err : undefined;
      if (!apiError) log('error', 'request failed', { path, error: (err as Error)?.stack ?? String(err) });
      const out = apiError ?? new ApiError('internal_error', 'the engine failed to serve this request; see its log');
      if (!res.headersSent) sendError(res, out);
      else if (!res.writableEnded) {
        // Mid-stream: the status is already 200, so the error travels as an event.
        res.end(sseEvent(out.toBody()) + SSE_DONE);
      }
    }
  }

  const server = createServer((req, res) => void handle(req, res));
  server.keepAliveTimeout = 65_000;

  return {
    server,
    ready(loaded) {
      engine = loaded;
    },
    async shutdown(graceMs) {
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const deadline = Date.now() + graceMs;
      while (inFlight.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const c of inFlight) c.abort(new Error('engine shutting down'));
      while (inFlight.size > 0) await new Promise((r) => setTimeout(r, 10));
      server.closeAllConnections();
      await closed;
    },
  };
}
