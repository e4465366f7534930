// The CPU engine image end to end: pulled from the loopback registry by
// dockerode, run as containers (tiny-chat in F16, Q8_0 and Q4_0, tiny-embed),
// and driven over real HTTP with the official openai SDK. The expected texts
// and token counts are the ones cpu-engine/README.md documents.
import Docker from 'dockerode';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { charTokenId } from '../cpu-engine/models/tiny-chat.js';
import { CPU_ENGINE_IMAGE, dockerAvailable } from './support/images.js';
import { eventually } from './support/node-agent-process.js';

const docker = new Docker();
/** Containers carry the test run's pid, so a run removes its own and those of runs that were killed. */
const LABELS = { 'svc.test': 'cpu-engine', 'svc.test.pid': String(process.pid) };
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz';

interface Engine {
  name: string;
  container: Docker.Container;
  baseUrl: string;
  client: OpenAI;
}

const engines = new Map<string, Engine>();
const engine = (name: string): Engine => engines.get(name)!;

async function pull(image: string): Promise<void> {
  const stream = await docker.pull(image);
  await new Promise<void>((resolve, reject) => docker.modem.followProgress(stream, (err) => (err ? reject(err) : resolve())));
}

async function start(name: string, args: string[]): Promise<Engine> {
  const container = await docker.createContainer({
    name: `svc-test-cpu-engine-${process.pid}-${name}`,
    Image: CPU_ENGINE_IMAGE,
    Cmd: args,
    Labels: LABELS,
    ExposedPorts: { '8000/tcp': {} },
    // An empty HostPort lets Docker pick a free one (never a fixed port in tests).
    HostConfig: { PortBindings: { '8000/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] } },
  });
  await container.start();
  const info = await container.inspect();
  const port = info.NetworkSettings.Ports['8000/tcp']?.[0]?.HostPort;
  if (!port) throw new Error(`no published port for ${name}`);
  const baseUrl = `http://127.0.0.1:${port}`;
  // Each probe has its own timeout: a connection made while the container's
  // network is still coming up can hang in docker-proxy instead of failing.
  const healthy = async () => (await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) })).status === 200;
  await eventually(healthy, 60_000, `${name} to be healthy`);
  const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: 'not-checked-by-the-engine', maxRetries: 0 });
  const e = { name, container, baseUrl, client };
  engines.set(name, e);
  return e;
}

const chatArgs = (quant: string) => ['--model', `/models/tiny-chat-${quant}.gguf`, '--served-model-name', 'tiny-chat', '--task', 'generate'];

async function post(baseUrl: string, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(baseUrl + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function removeContainers(whose: (pid: number) => boolean): Promise<void> {
  const listed = await docker.listContainers({ all: true, filters: { label: ['svc.test=cpu-engine'] } });
  const doomed = listed.filter((c) => whose(Number(c.Labels['svc.test.pid'])));
  await Promise.all(doomed.map((c) => docker.getContainer(c.Id).remove({ force: true })));
}

const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);
const norm = (a: number[]) => Math.sqrt(cosine(a, a));

describe('cpu engine image', () => {
  beforeAll(async () => {
    if (!(await dockerAvailable(docker))) {
      throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
    }
    await removeContainers((pid) => !alive(pid));
    await pull(CPU_ENGINE_IMAGE);
    await Promise.all([
      start('f16', chatArgs('f16')),
      start('q8_0', chatArgs('q8_0')),
      start('q4_0', chatArgs('q4_0')),
      start('embed', ['--model', '/models/tiny-embed-q8_0.gguf', '--served-model-name', 'tiny-embed', '--task', 'embed']),
    ]);
  });

  afterAll(() => removeContainers((pid) => pid === process.pid));

  it('is healthy and lists the one served model', async () => {
    const { baseUrl, client } = engine('q4_0');
    const health = await fetch(`${baseUrl}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const models = await client.models.list();
    expect(models.data).toEqual([expect.objectContaining({ id: 'tiny-chat', object: 'model', max_model_len: 2048 })]);
  });

  it.each(['f16', 'q8_0', 'q4_0'])('completes "abc" with the rest of the alphabet in %s', async (quant) => {
    const completion = await engine(quant).client.chat.completions.create({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'abc' }],
    });
    expect(completion).toMatchObject({
      object: 'chat.completion',
      model: 'tiny-chat',
      choices: [{ index: 0, message: { role: 'assistant', content: 'defghijklmnopqrstuvwxyz' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 4, completion_tokens: 23, total_tokens: 27 },
    });
    expect(completion.id).toMatch(/^chatcmpl-/);
  });

  it('renders every message, so prompt tokens count all of them (one per character, plus BOS)', async () => {
    const completion = await engine('q8_0').client.chat.completions.create({
      model: 'tiny-chat',
      temperature: 0,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Continue: ' }, { type: 'text', text: 'uvw' }] },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe('xyz');
    expect(completion.usage).toEqual({ prompt_tokens: 1 + 9 + 13, completion_tokens: 3, total_tokens: 26 });
  });

  it('starts at "a" after a non-letter, continues capitals in capitals, and ends at once after "z"', async () => {
    const ask = async (content: string) =>
      (await engine('f16').client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content }] })).choices[0]!;
    expect((await ask('Hello!')).message.content).toBe(ALPHABET);
    expect((await ask('XY')).message.content).toBe('Z');
    const z = await ask('xyz');
    expect(z.message.content).toBe('');
    expect(z.finish_reason).toBe('stop');
  });

  it('applies logit_bias: -100 bans a token, a large bias makes one win', async () => {
    const ask = async (extra: Record<string, unknown>) =>
      (await engine('f16').client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], max_tokens: 3, seed: 1, ...extra })).choices[0]!.message.content;
    expect(await ask({})).toBe('def');
    // 'e' banned: after 'd' the model has no favourite, and never says 'e'.
    expect(await ask({ logit_bias: { [charTokenId('e')]: -100 } })).not.toMatch(/e/);
    // 'Q' pushed past every other token: it comes first, and after it the capitals continue.
    expect(await ask({ logit_bias: { [charTokenId('Q')]: 100 } })).toBe('QQQ');
  });

  it('applies frequency_penalty and presence_penalty to the tokens it generated', async () => {
    // The tiny model's logits: its favourite next token scores sqrt(128) * 127/32 ≈ 44.9,
    // every other token exactly 0. A logit_bias on 'Q' makes 'Q' repeat under greedy
    // decoding; llama.cpp's penalty sampler subtracts count * frequency_penalty +
    // (count > 0) * presence_penalty from a token already generated, so it ends the run.
    const Q = charTokenId('Q');
    const ask = async (maxTokens: number, extra: Record<string, unknown>) =>
      (await engine('f16').client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], temperature: 0, max_tokens: maxTokens, ...extra })).choices[0]!.message.content;
    // Bias 100: 'Q' scores 100 against the favourite's 44.9. Alone it repeats to the cap; with
    // frequency_penalty 2 its 29th turn scores 100 - 2 * 28 = 44 and loses: the capitals continue.
    expect(await ask(40, { logit_bias: { [Q]: 100 } })).toBe('Q'.repeat(40));
    expect(await ask(40, { logit_bias: { [Q]: 100 }, frequency_penalty: 2 })).toBe(`${'Q'.repeat(28)}RSTUVWXYZ`);
    // Bias 46: 'Q' leads by about 1.1 until it has been said once; presence_penalty 2 then puts it behind.
    expect(await ask(12, { logit_bias: { [Q]: 46 } })).toBe('Q'.repeat(12));
    expect(await ask(12, { logit_bias: { [Q]: 46 }, presence_penalty: 2 })).toBe('QRSTUVWXYZ');
  });

  it('samples reproducibly: the same seed gives the same text at temperature > 0, another seed another text', async () => {
    // 'd' banned after "abc": the model has no favourite, every other token scores 0, so the
    // first token is a uniform draw over the vocabulary and the text depends on the seed.
    const ask = async (seed: number) =>
      (await engine('q8_0').client.chat.completions.create({
        model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], temperature: 1, max_tokens: 5, seed, logit_bias: { [charTokenId('d')]: -100 },
      })).choices[0]!.message.content;
    const seeds = [1, 2, 3, 4, 5, 6];
    const first = await Promise.all(seeds.map(ask));
    const again = await Promise.all(seeds.map(ask));
    expect(again).toEqual(first);
    expect(new Set(first).size).toBeGreaterThan(1);
  });

  it('constrains output to a response_format schema or a forced tool call; tool_choice none answers in text', async () => {
    const { client } = engine('q8_0');
    const schema = { type: 'object', properties: { unit: { enum: ['c', 'f'] }, n: { type: 'integer' }, ok: { type: 'boolean' } }, required: ['unit', 'n', 'ok'], additionalProperties: false };
    const structured = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
    const value = JSON.parse(structured.choices[0]!.message.content!) as { unit: string; n: number; ok: boolean };
    expect(Object.keys(value)).toEqual(['unit', 'n', 'ok']);
    expect(['c', 'f']).toContain(value.unit);
    expect(Number.isSafeInteger(value.n) && typeof value.ok === 'boolean').toBe(true);

    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'pick', parameters: { type: 'object', properties: { unit: { enum: ['c', 'f'] } }, required: ['unit'] } } }];
    const call = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], tools, tool_choice: 'required' });
    expect(call.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null, tool_calls: [{ type: 'function', function: { name: 'pick' } }] } });
    const toolCall = call.choices[0]!.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(['c', 'f']).toContain((JSON.parse(toolCall.function.arguments) as { unit: string }).unit);

    const none = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], tools, tool_choice: 'none' });
    expect(none.choices[0]!.message.content).toBe('defghijklmnopqrstuvwxyz');

    const refused = await client.chat.completions
      .create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object', properties: { a: { type: 'string', pattern: 'a+' } } } } }, stream: true })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ param: 'response_format.json_schema.schema.properties.a.pattern' });
  });

  it("answers 400, not 500, to a forced tool call whose schema its grammar cannot be built from: a 500 would have the control plane take it out of service", async () => {
    const { client } = engine('q8_0');
    const parameters = { type: 'object', properties: { x: { $ref: '#/$defs/a' } }, required: ['x'], $defs: { a: { $ref: '#/$defs/a' } } };
    const refused = await client.chat.completions
      .create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], tools: [{ type: 'function', function: { name: 'f', parameters } }], tool_choice: 'required' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ type: 'invalid_request' });
    // And it serves the next request.
    expect((await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }] })).choices[0]!.message.content).toBe('defghijklmnopqrstuvwxyz');
  });

  it('streams the same text, role first, then the finish reason and, when asked, usage', async () => {
    const stream = await engine('q4_0').client.chat.completions.create({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'abc' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('defghijklmnopqrstuvwxyz');
    const finish = chunks.at(-2)!;
    expect(finish.choices).toEqual([{ index: 0, delta: {}, finish_reason: 'stop' }]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 4, completion_tokens: 23, total_tokens: 27 });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it('frames the stream as OpenAI does, ending with data: [DONE], and sends no usage unless asked', async () => {
    const res = await fetch(`${engine('q4_0').baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'wx' }], stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await res.text();
    const events = text.split('\n\n').filter(Boolean);
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
    const payloads = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
    expect(payloads.map((p) => p.choices[0].delta.content ?? '').join('')).toBe('yz');
    expect(payloads.at(-1).choices[0].finish_reason).toBe('stop');
    expect(payloads.some((p) => 'usage' in p)).toBe(false);
  });

  it('stops at max_tokens with finish_reason "length", streamed or not', async () => {
    const { client } = engine('q8_0');
    const completion = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], max_tokens: 5 });
    expect(completion.choices[0]).toMatchObject({ message: { content: 'defgh' }, finish_reason: 'length' });
    expect(completion.usage).toEqual({ prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 });

    const stream = await client.chat.completions.create({
      model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], max_tokens: 5, stream: true, stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('defgh');
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('length');
    expect(chunks.at(-1)!.usage?.completion_tokens).toBe(5);
  });

  it('cuts the text before a stop sequence spanning several tokens, and does not output it', async () => {
    const { client } = engine('f16');
    const completion = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], stop: ['jkl', 'zz'] });
    expect(completion.choices[0]).toMatchObject({ message: { content: 'defghi' }, finish_reason: 'stop' });
    // The tokens of "jkl" were generated, so they are counted.
    expect(completion.usage?.completion_tokens).toBe(9);

    const stream = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], stop: 'jkl', stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('defghi');
  });

  it('answers 8 concurrent requests (more than --parallel 4), all correctly', async () => {
    const { client } = engine('q4_0');
    const starts = ['a', 'c', 'e', 'g', 'i', 'k', 'm', 'o'];
    const results = await Promise.all(
      starts.map(async (s, i) => {
        if (i % 2 === 0) {
          const c = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: s }] });
          return c.choices[0]!.message.content;
        }
        const stream = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: s }], stream: true });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
        return text;
      }),
    );
    expect(results).toEqual(starts.map((s) => ALPHABET.slice(ALPHABET.indexOf(s) + 1)));
  });

  it('keeps serving after clients disconnect from streams mid-way', async () => {
    const { baseUrl, client } = engine('q8_0');
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        const controller = new AbortController();
        const res = await fetch(`${baseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: '!' }], stream: true }),
          signal: controller.signal,
        });
        const reader = res.body!.getReader();
        await reader.read(); // the first bytes arrived: the request is being served
        controller.abort();
      }),
    );
    const after = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }] });
    expect(after.choices[0]!.message.content).toBe('defghijklmnopqrstuvwxyz');
    expect((await fetch(`${baseUrl}/health`)).status).toBe(200);
  });

  it('refuses bad requests with a 400 envelope naming the param', async () => {
    const { baseUrl, client } = engine('q4_0');
    const badJson = await post(baseUrl, '/v1/chat/completions', '{"model": ');
    expect(badJson.status).toBe(400);
    expect(badJson.body).toEqual({ error: { type: 'invalid_request', message: expect.stringMatching(/not valid JSON/) } });

    const err = await client.chat.completions
      .create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], temperature: 5 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ type: 'invalid_request', param: 'temperature' });

    expect(await post(baseUrl, '/v1/chat/completions', { model: 'tiny-chat', messages: [{ role: 'user', content: 'a' }], n: 2 }))
      .toMatchObject({ status: 400, body: { error: { type: 'invalid_request', param: 'n' } } });
    expect(await post(baseUrl, '/v1/chat/completions', { model: 'tiny-chat', messages: [{ role: 'user', content: 'a' }], stop: ['a', 'b', 'c', 'd', 'e'] }))
      .toMatchObject({ status: 400, body: { error: { param: 'stop' } } });
    expect(await post(baseUrl, '/v1/chat/completions', { model: 'gpt-4', messages: [{ role: 'user', content: 'a' }] }))
      .toMatchObject({ status: 404, body: { error: { type: 'model_not_found', param: 'model' } } });
    expect(await post(baseUrl, '/v1/embeddings', { model: 'tiny-chat', input: 'a' }))
      .toMatchObject({ status: 400, body: { error: { type: 'invalid_request', param: 'model' } } });
    const unknown = await fetch(`${baseUrl}/v1/completions/nope`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { type: 'not_found' } });
  });

  it('refuses prompts and max_tokens that do not fit the 2,048-token context', async () => {
    const { baseUrl } = engine('q4_0');
    expect(await post(baseUrl, '/v1/chat/completions', { model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }], max_tokens: 2045 }))
      .toMatchObject({ status: 400, body: { error: { type: 'invalid_request', param: 'max_tokens' } } });
    expect(await post(baseUrl, '/v1/chat/completions', { model: 'tiny-chat', messages: [{ role: 'user', content: 'a'.repeat(2047) }] }))
      .toMatchObject({ status: 400, body: { error: { type: 'invalid_request', param: 'messages' } } });
    // 2,046 characters + BOS leave room for exactly one token.
    const edge = await post(baseUrl, '/v1/chat/completions', { model: 'tiny-chat', messages: [{ role: 'user', content: 'a'.repeat(2046) }] });
    expect(edge).toMatchObject({ status: 200, body: { choices: [{ message: { content: 'b' }, finish_reason: 'length' }], usage: { prompt_tokens: 2047, completion_tokens: 1 } } });
  });

  it('embeds several inputs as unit vectors of dimension 128, in order, the same on every call', async () => {
    const { client } = engine('embed');
    const input = ['hello world', 'the quick brown fox', 'a'];
    const first = await client.embeddings.create({ model: 'tiny-embed', input, encoding_format: 'float' });
    expect(first.object).toBe('list');
    expect(first.model).toBe('tiny-embed');
    expect(first.data.map((d) => d.index)).toEqual([0, 1, 2]);
    // WordPiece: one token per non-space character, plus [CLS] and [SEP].
    expect(first.usage).toEqual({ prompt_tokens: 12 + 18 + 3, total_tokens: 33 });
    for (const d of first.data) {
      expect(d.embedding).toHaveLength(128);
      expect(norm(d.embedding)).toBeCloseTo(1, 5);
    }
    const [hello, fox, a] = first.data.map((d) => d.embedding);
    expect(cosine(hello!, fox!)).toBeLessThan(0.9);
    expect(cosine(hello!, a!)).toBeLessThan(0.9);

    const again = await client.embeddings.create({ model: 'tiny-embed', input: ['a', 'hello world'], encoding_format: 'float' });
    expect(again.data[0]!.embedding).toEqual(a);
    expect(again.data[1]!.embedding).toEqual(hello);
    // The SDK's default base64 encoding decodes to the same vector (float32).
    const packed = await client.embeddings.create({ model: 'tiny-embed', input: 'a' });
    packed.data[0]!.embedding.forEach((x, i) => expect(x).toBeCloseTo(a![i]!, 6));
  });

  it('refuses an embedding input longer than the 512-token context, naming it', async () => {
    const { baseUrl } = engine('embed');
    // 510 characters + [CLS] + [SEP] is exactly the context.
    const fits = await post(baseUrl, '/v1/embeddings', { model: 'tiny-embed', input: ['x'.repeat(510)] });
    expect(fits.status).toBe(200);
    expect(fits.body.usage.prompt_tokens).toBe(512);
    expect(await post(baseUrl, '/v1/embeddings', { model: 'tiny-embed', input: ['ok', 'x'.repeat(511)] }))
      .toMatchObject({ status: 400, body: { error: { type: 'invalid_request', param: 'input[1]', message: expect.stringMatching(/513 tokens/) } } });
    expect(await post(baseUrl, '/v1/chat/completions', { model: 'tiny-embed', messages: [{ role: 'user', content: 'a' }] }))
      .toMatchObject({ status: 400, body: { error: { param: 'model' } } });
  });

  it('exits 0 on SIGTERM', async () => {
    const { container } = engine('f16');
    await container.stop({ t: 20 });
    expect((await container.inspect()).State.ExitCode).toBe(0);
  });
});
