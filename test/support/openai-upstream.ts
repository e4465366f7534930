// A minimal, fast OpenAI-compatible model server, standing in for what cannot run here:
// vLLM on a GPU (which makes tool calls), and a replica cheap enough that a benchmark
// measures the control plane rather than the model. Its behaviour is scripted per test
// (fail, hang mid-stream, break mid-stream, answer with tool calls) and it records what it
// was asked. Like vLLM it can require an API key (apiKey: every path but /health answers
// 401 without `Authorization: Bearer <key>`), and it sends usage on every chunk when asked
// for stream_options.continuous_usage_stats, and log probabilities when asked for logprobs.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * hang-stream: role and first word, then silence; break-stream: the same, then the connection
 * drops; held: a whole completion answered only when the test calls release() (it is still
 * generating meanwhile); progress-stream: usage-only chunks (16, 32, 48 tokens) while the
 * output is held back, as the CPU engine reports a forced call, then the answer;
 * progress-hang: the same chunks, then silence; flood-stream: content chunks of 4 KiB
 * for as long as the client takes them, each written once the one before drained, as an
 * engine that waits on its reader (the CPU engine) generates only as fast as it is read.
 */
export type UpstreamMode = 'ok' | 'fail' | 'held' | 'hang-stream' | 'break-stream' | 'refuse-in-stream' | 'progress-stream' | 'progress-hang' | 'flood-stream';

export interface UpstreamRecord {
  path: string;
  body: any;
}

export interface OpenAiUpstream {
  baseUrl: string;
  name: string;
  mode: UpstreamMode;
  healthy: boolean;
  /** A request whose last message contains this answers 500, as an engine bug some input triggers. */
  failOn: string | undefined;
  /** Requests received, newest last. */
  requests: UpstreamRecord[];
  /** Answers whose client went away before the end (streams, and whole completions in mode held). */
  abandonedStreams: number;
  /** How long a stream's prompt takes before its first chunk (its prefill); 0 by default. */
  prefillMs: number;
  /** Streams whose client went away during their prefill, before the first chunk. */
  cancelledInPrefill: number;
  /** Sends the whole completions mode held is holding. */
  release(): void;
  /** Requests refused for a missing or wrong API key. */
  refused: number;
  close(): Promise<void>;
}

export interface UpstreamOptions {
  /** Appears in every answer, so a test can tell replicas apart. */
  name?: string;
  /** Length of embedding vectors. */
  dimension?: number;
  /** Keep a log of requests (off for benchmarks). */
  record?: boolean;
  /** Embedding inputs longer than this are refused as engines refuse inputs past their context. */
  maxInputChars?: number;
  /** Like vLLM's --api-key: required on every path but /health. */
  apiKey?: string;
}

const USAGE = { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 };

export async function startOpenAiUpstream(options: UpstreamOptions = {}): Promise<OpenAiUpstream> {
  const name = options.name ?? 'upstream';
  const dimension = options.dimension ?? 8;
  const words = ['Hello', ' from', ` ${name}`];
  const completion = JSON.stringify({
    id: 'cmpl-up',
    object: 'chat.completion',
    created: 0,
    model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: words.join('') }, finish_reason: 'stop' }],
    usage: USAGE,
  });
  const held: Array<() => void> = [];
  const state: OpenAiUpstream = {
    baseUrl: '',
    name,
    mode: 'ok',
    healthy: true,
    failOn: undefined,
    requests: [],
    abandonedStreams: 0,
    prefillMs: 0,
    cancelledInPrefill: 0,
    refused: 0,
    release: () => {
      for (const answer of held.splice(0)) answer();
    },
    close: async () => undefined,
  };

  const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: object, logprobs?: object) =>
    `data: ${JSON.stringify({ id: 'cmpl-up', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, ...(logprobs ? { logprobs } : {}), finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
  // As vLLM with logprobs: true: one entry per generated token, top_logprobs alternatives each.
  const logprobOf = (word: string, top: number) => {
    const entry = (token: string, logprob: number) => ({ token, logprob, bytes: [...Buffer.from(token)] });
    return { ...entry(word, -0.25), top_logprobs: Array.from({ length: top }, (_, i) => entry(i === 0 ? word : `${word}${i}`, -0.25 - i)) };
  };

  function chat(body: any, res: ServerResponse): void {
    const toolCall = body.tools?.length
      ? [{ id: 'call_up1', type: 'function', function: { name: body.tools[0].function.name, arguments: '{"city":"Oslo"}' } }]
      : null;
    const logprobs = body.logprobs === true ? words.map((w) => logprobOf(w, body.top_logprobs ?? 0)) : undefined;
    if (state.mode === 'held' && !body.stream) {
      res.on('close', () => {
        if (!res.writableFinished) state.abandonedStreams++;
      });
      held.push(() => send(res, 200, completion));
      return;
    }
    if (!body.stream) {
      if (logprobs && !toolCall) {
        const parsed = JSON.parse(completion);
        parsed.choices[0].logprobs = { content: logprobs };
        return send(res, 200, JSON.stringify(parsed));
      }
      if (!toolCall) return send(res, 200, completion);
      return send(res, 200, JSON.stringify({
        id: 'cmpl-up', object: 'chat.completion', created: 0, model: 'm',
        choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: toolCall }, finish_reason: 'tool_calls' }],
        usage: USAGE,
      }));
    }
    // As vLLM: continuous_usage_stats counts only together with include_usage.
    const continuous = body.stream_options?.include_usage === true && body.stream_options?.continuous_usage_stats === true;
    const soFar = (completion: number) =>
      continuous ? { prompt_tokens: USAGE.prompt_tokens, completion_tokens: completion, total_tokens: USAGE.prompt_tokens + completion } : undefined;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (state.prefillMs > 0) {
      // As an engine's prefill: the headers at once, the first chunk once the prompt is processed.
      res.flushHeaders();
      const prefill = state.prefillMs;
      setTimeout(() => (res.destroyed ? state.cancelledInPrefill++ : streamAnswer(body, res, toolCall, logprobs, soFar)), prefill);
      return;
    }
    streamAnswer(body, res, toolCall, logprobs, soFar);
  }

  function streamAnswer(body: any, res: ServerResponse, toolCall: object[] | null, logprobs: object[] | undefined, soFar: (completion: number) => object | undefined): void {
    if (state.mode === 'refuse-in-stream') {
      // As vLLM 0.11 refuses what it checks only once a stream was answered 200 (an
      // out-of-vocabulary logit_bias token): an error event with its HTTP code, then [DONE].
      res.write(`data: ${JSON.stringify({ error: { object: 'error', message: 'token_id(s) [999999999] in logit_bias contain out-of-vocab token ids', type: 'BadRequestError', param: null, code: 400 } })}\n\n`);
      return void res.end('data: [DONE]\n\n');
    }
    res.write(chunk({ role: 'assistant', content: '' }, null, soFar(0)));
    if (state.mode === 'progress-stream' || state.mode === 'progress-hang') {
      for (const done of [16, 32, 48]) {
        res.write(`data: ${JSON.stringify({ id: 'cmpl-up', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [], usage: { prompt_tokens: USAGE.prompt_tokens, completion_tokens: done, total_tokens: USAGE.prompt_tokens + done } })}\n\n`);
      }
      if (state.mode === 'progress-hang') {
        res.on('close', () => {
          if (!res.writableFinished) state.abandonedStreams++;
        });
        return;
      }
    }
    if (state.mode === 'flood-stream') {
      const text = 'x'.repeat(4096);
      let tokens = 0;
      res.on('close', () => {
        if (!res.writableFinished) state.abandonedStreams++;
      });
      const more = (): void => {
        while (!res.destroyed && res.write(chunk({ content: text }, null, soFar(++tokens)))) {
          if (tokens % 64 === 0) return void setImmediate(more);
        }
        if (!res.destroyed) res.once('drain', more);
      };
      return more();
    }
    if (state.mode === 'hang-stream' || state.mode === 'break-stream') {
      res.write(chunk({ content: words[0] }, null, soFar(1)));
      if (state.mode === 'break-stream') {
        // The engine died mid-stream: the connection drops without [DONE].
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      res.on('close', () => {
        if (!res.writableFinished) state.abandonedStreams++;
      });
      return; // never ends: the client must give up or go away
    }
    if (toolCall) res.write(chunk({ tool_calls: toolCall.map((c, index) => ({ index, ...c })) }, null, soFar(USAGE.completion_tokens)));
    else words.forEach((w, i) => res.write(chunk({ content: w }, null, soFar(i + 1), logprobs && { content: [logprobs[i]] })));
    res.write(chunk({}, toolCall ? 'tool_calls' : 'stop', soFar(USAGE.completion_tokens)));
    if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ id: 'cmpl-up', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [], usage: USAGE })}\n\n`);
    res.end('data: [DONE]\n\n');
  }

  function embeddings(body: any, res: ServerResponse): void {
    const inputs: string[] = typeof body.input === 'string' ? [body.input] : body.input;
    const tooLong = inputs.findIndex((text) => text.length > (options.maxInputChars ?? Infinity));
    if (tooLong >= 0) {
      return send(res, 400, JSON.stringify({ error: { type: 'invalid_request', message: `input[${tooLong}] is longer than the context`, param: `input[${tooLong}]` } }));
    }
    const data = inputs.map((text, index) => {
      // A unit vector that depends on the text: its length picks the hot component.
      const v = new Array(dimension).fill(0);
      v[text.length % dimension] = 1;
      return { object: 'embedding', index, embedding: v };
    });
    const tokens = inputs.reduce((n, t) => n + t.length, 0);
    send(res, 200, JSON.stringify({ object: 'list', model: 'm', data, usage: { prompt_tokens: tokens, total_tokens: tokens } }));
  }

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url === '/health') return send(res, state.healthy ? 200 : 503, '{"status":"ok"}');
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      state.refused++;
      return send(res, 401, '{"error":{"message":"Unauthorized"}}');
    }
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (raw += d));
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : {};
      if (options.record !== false) state.requests.push({ path: req.url ?? '', body });
      if (state.mode === 'fail') return send(res, 500, '{"error":{"message":"engine crashed"}}');
      const last = body.messages?.at?.(-1)?.content;
      if (state.failOn !== undefined && typeof last === 'string' && last.includes(state.failOn)) {
        return send(res, 500, '{"error":{"message":"EngineCore encountered an issue"}}');
      }
      if (req.url === '/v1/chat/completions') return chat(body, res);
      if (req.url === '/v1/embeddings') return embeddings(body, res);
      send(res, 404, '{"error":{"message":"not found"}}');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
