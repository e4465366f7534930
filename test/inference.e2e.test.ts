// Hosted inference end to end, driven by the official `openai` SDK, unmodified: the real
// control plane with desired replicas, a real agent process running the project's CPU
// engine image (pulled from the loopback registry) with the tiny GGUF models, real HTTP
// all the way. The tiny chat model continues the alphabet from the prompt's last letter
// (cpu-engine/README.md), so every quantization has one exact expected answer.
import Docker from 'dockerode';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './support/node-agent-process.js';
import { startReplicaStack, type ReplicaStack } from './support/replica-stack.js';

const docker = new Docker();
const SANDBOX_DAILY_TOKENS = 300;
/** tiny-chat in every variant in na (int4 twice), and one int4 replica wanted in eu, where no node runs. */
const REPLICAS = 'tiny-chat:fp16:na=1,tiny-chat:fp8:na=1,tiny-chat:int4:na=2,tiny-chat:int4:eu=1,tiny-embed:int4:na=1';
let stack: ReplicaStack;
let cp: ReplicaStack['cp'];
let orgId: string;
let client: OpenAI;
let liveKey: string;

const sdk = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${cp.baseUrl}/v1`, maxRetries: 0, timeout: 20_000 });
/** Service extensions go in the body next to the SDK's own fields. */
type Extended<T> = T & { quantization?: 'fp16' | 'fp8' | 'int4' };
const ask = (content: string) => [{ role: 'user' as const, content }];
const ALPHABET_AFTER_C = 'defghijklmnopqrstuvwxyz';

beforeAll(async () => {
  stack = await startReplicaStack({
    name: 'inference-e2e',
    replicas: REPLICAS,
    ready: 5,
    enrollTimeoutMs: 60_000,
    readyTimeoutMs: 90_000,
    config: { sandboxDailyTokens: SANDBOX_DAILY_TOKENS },
  });
  ({ cp, orgId } = stack);
  liveKey = (await cp.app.services.keys.create({ orgId })).value;
  client = sdk(liveKey);
}, 120_000);

afterAll(() => stack?.close());

describe('chat completions through the official SDK', () => {
  it('answers with the exact text in every quantization, each with its own fingerprint', async () => {
    const fingerprints = new Set<string>();
    for (const quantization of ['fp16', 'fp8', 'int4'] as const) {
      const body: Extended<OpenAI.ChatCompletionCreateParamsNonStreaming> = { model: 'tiny-chat', messages: ask('abc'), quantization };
      const completion = await client.chat.completions.create(body);
      expect(completion.choices[0]!.message.content).toBe(ALPHABET_AFTER_C);
      expect(completion.choices[0]!.finish_reason).toBe('stop');
      expect(completion).toMatchObject({ object: 'chat.completion', model: 'tiny-chat', pool: 'na' });
      // BOS plus one token per character of the prompt; one per letter of the answer.
      expect(completion.usage).toEqual({ prompt_tokens: 4, completion_tokens: 23, total_tokens: 27 });
      fingerprints.add(completion.system_fingerprint!);
    }
    expect(fingerprints.size).toBe(3);
  });

  it('defaults to the cheapest variant (int4), and honours max_tokens and stop', async () => {
    const short = await client.chat.completions.create({ model: 'tiny-chat', messages: ask('xyz, then k'), max_tokens: 5 });
    expect(short.choices[0]).toMatchObject({ message: { content: 'lmnop' }, finish_reason: 'length' });
    const int4 = await client.chat.completions.create({ model: 'tiny-chat', messages: ask('abc'), quantization: 'int4' } as Extended<OpenAI.ChatCompletionCreateParamsNonStreaming>);
    expect(short.system_fingerprint).toBe(int4.system_fingerprint);
    const stopped = await client.chat.completions.create({ model: 'tiny-chat', messages: ask('abc'), stop: ['h'] });
    expect(stopped.choices[0]).toMatchObject({ message: { content: 'defg' }, finish_reason: 'stop' });
  });

  it('streams the same text, chunk by chunk, with usage when asked', async () => {
    for (const quantization of ['fp16', 'int4'] as const) {
      const stream = await client.chat.completions.create({
        model: 'tiny-chat',
        messages: ask('abc'),
        stream: true,
        stream_options: { include_usage: true },
        quantization,
      } as Extended<OpenAI.ChatCompletionCreateParamsStreaming>);
      let text = '';
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      for await (const chunk of stream) {
        chunks.push(chunk);
        text += chunk.choices[0]?.delta.content ?? '';
      }
      expect(text).toBe(ALPHABET_AFTER_C);
      expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
      expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'tiny-chat' && (c as { pool?: string }).pool === 'na')).toBe(true);
      expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('stop');
      expect(chunks.at(-1)!.usage).toEqual({ prompt_tokens: 4, completion_tokens: 23, total_tokens: 27 });
    }
  });

  it('counts usage per request from the engine, priced by the rate card', async () => {
    const before = Date.now();
    await client.chat.completions.create({ model: 'tiny-chat', messages: ask('uvw'), quantization: 'fp16', user: 'end-user-7' } as Extended<OpenAI.ChatCompletionCreateParamsNonStreaming>);
    const res = await fetch(`${cp.baseUrl}/v1/usage?model=tiny-chat&limit=1`, { headers: { authorization: `Bearer ${liveKey}` } });
    const [record] = ((await res.json()) as { data: Array<Record<string, unknown>> }).data;
    expect(record).toMatchObject({ kind: 'chat', model: 'tiny-chat', quantization: 'fp16', pool: 'na', prompt_tokens: 4, completion_tokens: 3, total_tokens: 7, user: 'end-user-7', sandbox: false });
    expect(record!.created as number).toBeGreaterThanOrEqual(Math.floor(before / 1000));
    expect(record!.cost_usd as number).toBeGreaterThan(0);
  });
});

describe('embeddings through the official SDK', () => {
  it("returns with the SDK's default (base64) exactly what the float format returns", async () => {
    const input = ['the quick brown fox', 'jumps over', 'the lazy dog'];
    const viaBase64 = await client.embeddings.create({ model: 'tiny-embed', input });
    const viaFloat = await client.embeddings.create({ model: 'tiny-embed', input, encoding_format: 'float' });
    expect(viaBase64.data.map((d) => d.index)).toEqual([0, 1, 2]);
    expect(viaBase64.data.map((d) => d.embedding)).toEqual(viaFloat.data.map((d) => d.embedding));
    for (const d of viaFloat.data) {
      expect(d.embedding).toHaveLength(128);
      expect(Math.hypot(...d.embedding)).toBeCloseTo(1, 4);
    }
    expect(viaFloat.data[0]!.embedding).not.toEqual(viaFloat.data[1]!.embedding);
    expect(viaFloat.usage.prompt_tokens).toBeGreaterThan(0);
  });

  it("refuses an input longer than the model's context, naming it by its place in the request", async () => {
    // tiny-embed has a 512-token context; a token per character (cpu-engine/README.md).
    const input = ['short', 'also short', 'x'.repeat(600)];
    const err = await client.embeddings.create({ model: 'tiny-embed', input }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({ status: 400, type: 'invalid_request', param: 'input[2]' });
  });

  it('truncates a Matryoshka model to `dimensions` and re-normalises', async () => {
    const full = (await client.embeddings.create({ model: 'tiny-embed', input: 'matryoshka', encoding_format: 'float' })).data[0]!.embedding;
    const cut = (await client.embeddings.create({ model: 'tiny-embed', input: 'matryoshka', dimensions: 32, encoding_format: 'float' })).data[0]!.embedding;
    expect(cut).toHaveLength(32);
    expect(Math.hypot(...cut)).toBeCloseTo(1, 6);
    const norm = Math.hypot(...full.slice(0, 32));
    cut.forEach((x, i) => expect(x).toBeCloseTo(full[i]! / norm, 5));
  });
});

describe('sandbox keys through the official SDK', () => {
  it('make a tool call, then answer the tool result, without touching replicas', async () => {
    const sandbox = sdk((await cp.app.services.keys.create({ orgId, kind: 'test' })).value);
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Oslo?' }];
    const first = await sandbox.chat.completions.create({ model: 'tiny-chat', messages, tools });
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'example' });

    messages.push(first.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: '{"celsius":3}' });
    const second = await sandbox.chat.completions.create({ model: 'tiny-chat', messages, tools });
    expect(second.choices[0]!.finish_reason).toBe('stop');
    expect(second.choices[0]!.message.content).toContain('celsius');
    const again = await sandbox.chat.completions.create({ model: 'tiny-chat', messages, tools });
    expect(again.choices[0]!.message.content).toBe(second.choices[0]!.message.content);
  });
});

describe('errors raised by the SDK with our status and type', () => {
  const expectRaised = async (call: () => Promise<unknown>, errorClass: abstract new (...args: never[]) => InstanceType<typeof OpenAI.APIError>, status: number, type: string) => {
    const err = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(errorClass);
    expect(err).toMatchObject({ status, type });
    return err as InstanceType<typeof OpenAI.APIError>;
  };

  it('400 invalid_request, with the param', async () => {
    const err = await expectRaised(() => client.chat.completions.create({ model: 'tiny-chat', messages: ask('a'), temperature: 3 }), OpenAI.BadRequestError, 400, 'invalid_request');
    expect(err.param).toBe('temperature');
  });

  it('401 unauthorized', async () => {
    await expectRaised(() => sdk('svc_sk_live_not-a-real-key').chat.completions.create({ model: 'tiny-chat', messages: ask('a') }), OpenAI.AuthenticationError, 401, 'unauthorized');
  });

  it('403 forbidden_scope', async () => {
    const computeOnly = sdk((await cp.app.services.keys.create({ orgId, scopes: ['compute:read'] })).value);
    await expectRaised(() => computeOnly.embeddings.create({ model: 'tiny-embed', input: 'a' }), OpenAI.PermissionDeniedError, 403, 'forbidden_scope');
  });

  it('404 model_not_found: an unknown model, and a pool that does not serve the model', async () => {
    await expectRaised(() => client.chat.completions.create({ model: 'gpt-17', messages: ask('a') }), OpenAI.NotFoundError, 404, 'model_not_found');
    const err = await expectRaised(
      () => client.chat.completions.create({ model: 'tiny-chat', messages: ask('a') }, { headers: { 'X-Service-Pool': 'apac' } }),
      OpenAI.NotFoundError,
      404,
      'model_not_found',
    );
    expect(err.message).toContain('served in na');
  });

  it('409 no_capacity for a model no replica serves', async () => {
    await expectRaised(() => client.chat.completions.create({ model: 'llama-3.1-8b-instruct', messages: ask('a') }), OpenAI.ConflictError, 409, 'no_capacity');
  });

  it('429 rate_limited with code daily_token_cap once a sandbox key used its tokens', async () => {
    const sandbox = sdk((await cp.app.services.keys.create({ orgId, kind: 'test' })).value);
    const err = await expectRaised(
      async () => {
        for (let i = 0; i < 50; i++) await sandbox.chat.completions.create({ model: 'tiny-chat', messages: ask(`question number ${i} about something`) });
      },
      OpenAI.RateLimitError,
      429,
      'rate_limited',
    );
    expect(err.code).toBe('daily_token_cap');
    expect(Number(err.headers?.get('retry-after'))).toBeGreaterThan(0);
  });

  it('503 pool_degraded when pinned to a pool whose replicas are not up, naming a healthy pool', async () => {
    const err = await expectRaised(
      () => client.chat.completions.create({ model: 'tiny-chat', messages: ask('a') }, { headers: { 'X-Service-Pool': 'eu' } }),
      OpenAI.InternalServerError,
      503,
      'pool_degraded',
    );
    expect(err.message).toContain('X-Service-Pool: na');
  });
});

describe('replica failure', () => {
  it('a killed replica is restarted by its agent and routing recovers', async () => {
    const int4 = () => cp.app.services.replicaDirectory.ready({ model: 'tiny-chat', quantization: 'int4', pool: 'na' });
    expect(int4()).toHaveLength(2);
    const [victim, survivor] = int4();
    const [container] = await docker.listContainers({ filters: { label: [`svc.replica=${victim!.id}`] } });
    await docker.getContainer(container!.Id).kill();

    // The survivor takes the traffic at once: a request that hits the dead replica is retried.
    for (let i = 0; i < 6; i++) {
      const completion = await client.chat.completions.create({ model: 'tiny-chat', messages: ask('abc') });
      expect(completion.choices[0]!.message.content).toBe(ALPHABET_AFTER_C);
    }
    // The agent restarts the container; the replica is routable again.
    await eventually(async () => {
      const record = (await cp.app.services.replicas.list({ includeEnded: false, limit: 100 })).find((r) => r.id === victim!.id);
      return record?.status === 'running' && record.restarts >= 1 && int4().some((r) => r.id === victim!.id);
    }, 60_000, 'the killed replica to run again');
    expect(int4().map((r) => r.id).sort()).toEqual([victim!.id, survivor!.id].sort());

    // With every int4 replica gone at once, unpinned requests are refused quickly, not hung;
    // once they are back, the same request succeeds.
    for (const r of int4()) {
      const [c] = await docker.listContainers({ filters: { label: [`svc.replica=${r.id}`] } });
      await docker.getContainer(c!.Id).kill();
    }
    const during = await client.chat.completions.create({ model: 'tiny-chat', messages: ask('abc'), quantization: 'int4' } as Extended<OpenAI.ChatCompletionCreateParamsNonStreaming>).then(
      (c) => c.choices[0]!.message.content,
      (e: InstanceType<typeof OpenAI.APIError>) => e.status,
    );
    expect([ALPHABET_AFTER_C, 409, 503]).toContain(during);
    const recovered = await eventually(
      async () =>
        client.chat.completions
          .create({ model: 'tiny-chat', messages: ask('abc'), quantization: 'int4' } as Extended<OpenAI.ChatCompletionCreateParamsNonStreaming>)
          .then((c) => c.choices[0]!.message.content, () => undefined),
      60_000,
      'int4 requests to succeed again',
      250,
    );
    expect(recovered).toBe(ALPHABET_AFTER_C);
  }, 150_000);
});
