import { describe, expect, it } from 'vitest';
import { ApiError } from '../../shared/src/errors.js';
import { completionBudget, parseChatRequest } from './chat-request.js';

const user = (content: unknown) => ({ role: 'user', content });
const base = { model: 'tiny-chat', messages: [user('abc')] };

function errorOf(fn: () => unknown): { status: number; type: string; param: string | undefined; message: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, type: err.type, param: err.param, message: err.message };
    throw err;
  }
  throw new Error('expected an ApiError');
}

describe('parseChatRequest', () => {
  it('maps a minimal request to the defaults', () => {
    expect(parseChatRequest(base)).toEqual({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'abc' }],
      maxTokens: undefined,
      temperature: 0.7,
      topP: 1,
      topK: 0,
      seed: undefined,
      stop: [],
      stream: false,
      includeUsage: false,
      continuousUsage: false,
      frequencyPenalty: 0,
      presencePenalty: 0,
      logitBias: new Map(),
      constraint: { kind: 'none' },
    });
  });

  it('maps every supported field', () => {
    const r = parseChatRequest({
      ...base,
      max_tokens: 5, temperature: 0, top_p: 0.9, top_k: 40, seed: 7, stop: 'xy', n: 1,
      stream: true, stream_options: { include_usage: true },
      tools: [{ type: 'function', function: { name: 'f', parameters: {} } }], tool_choice: 'auto', user: 'u1',
    });
    expect(r).toMatchObject({ maxTokens: 5, temperature: 0, topP: 0.9, topK: 40, seed: 7, stop: ['xy'], stream: true, includeUsage: true, continuousUsage: false });
  });

  it.each([
    [{ include_usage: true, continuous_usage_stats: true }, true, true],
    [{ include_usage: true, continuous_usage_stats: false }, true, false],
    // As vLLM: usage on every chunk only when usage is asked for at all.
    [{ continuous_usage_stats: true }, false, false],
  ])('stream_options %j: include %s, continuous %s', (options, include, continuous) => {
    const r = parseChatRequest({ ...base, stream: true, stream_options: options });
    expect([r.includeUsage, r.continuousUsage]).toEqual([include, continuous]);
  });

  it('takes max_completion_tokens for max_tokens, -1 and null as "off"/"default"', () => {
    expect(parseChatRequest({ ...base, max_completion_tokens: 9 }).maxTokens).toBe(9);
    expect(parseChatRequest({ ...base, top_k: -1 }).topK).toBe(0);
    expect(parseChatRequest({ ...base, temperature: null, max_tokens: null }).temperature).toBe(0.7);
  });

  it('accepts all four roles, text-part arrays and tool-call messages', () => {
    const r = parseChatRequest({
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Hi ' }, { type: 'text', text: 'there' }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: '42' },
      ],
    });
    expect(r.messages.map((m) => [m.role, m.content])).toEqual([
      ['system', 'Be brief.'], ['user', 'Hi there'], ['assistant', ''], ['tool', '42'],
    ]);
    expect(r.messages[3]!.tool_call_id).toBe('c1');
  });

  it.each([
    ['not an object', [], undefined],
    ['no model', { messages: [user('x')] }, 'model'],
    ['empty model', { ...base, model: '' }, 'model'],
    ['no messages', { model: 'm' }, 'messages'],
    ['empty messages', { model: 'm', messages: [] }, 'messages'],
    ['a bad role', { model: 'm', messages: [{ role: 'robot', content: 'x' }] }, 'messages[0].role'],
    ['a message that is not an object', { model: 'm', messages: ['hi'] }, 'messages[0]'],
    ['missing content', { model: 'm', messages: [{ role: 'user' }] }, 'messages[0].content'],
    ['numeric content', { model: 'm', messages: [user(5)] }, 'messages[0].content'],
    ['an image part', { model: 'm', messages: [user([{ type: 'image_url', image_url: { url: 'x' } }])] }, 'messages[0].content[0].type'],
    ['max_tokens 0', { ...base, max_tokens: 0 }, 'max_tokens'],
    ['fractional max_tokens', { ...base, max_tokens: 1.5 }, 'max_tokens'],
    ['temperature 3', { ...base, temperature: 3 }, 'temperature'],
    ['temperature as a string', { ...base, temperature: '1' }, 'temperature'],
    ['top_p 1.5', { ...base, top_p: 1.5 }, 'top_p'],
    ['top_k -2', { ...base, top_k: -2 }, 'top_k'],
    ['a fractional seed', { ...base, seed: 0.5 }, 'seed'],
    ['n 2', { ...base, n: 2 }, 'n'],
    ['five stop sequences', { ...base, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
    ['an empty stop sequence', { ...base, stop: [''] }, 'stop'],
    ['a numeric stop', { ...base, stop: 5 }, 'stop'],
    ['stream as a string', { ...base, stream: 'yes' }, 'stream'],
    ['stream_options without stream', { ...base, stream_options: { include_usage: true } }, 'stream_options'],
    ['a bad include_usage', { ...base, stream: true, stream_options: { include_usage: 1 } }, 'stream_options.include_usage'],
    ['a bad continuous_usage_stats', { ...base, stream: true, stream_options: { include_usage: true, continuous_usage_stats: 'yes' } }, 'stream_options.continuous_usage_stats'],
    ['tools that are not an array', { ...base, tools: {} }, 'tools'],
  ])('rejects %s with a 400 naming the param', (_name, body, param) => {
    const err = errorOf(() => parseChatRequest(body));
    expect(err).toMatchObject({ status: 400, type: 'invalid_request', param });
    expect(err.message.length).toBeGreaterThan(10);
  });
});

describe('completionBudget', () => {
  it('is max_tokens when it fits, else the rest of the context', () => {
    expect(completionBudget(4, 5, 2048)).toBe(5);
    expect(completionBudget(4, undefined, 2048)).toBe(2044);
    expect(completionBudget(4, 2044, 2048)).toBe(2044);
  });

  it('blames max_tokens when the prompt fits but max_tokens does not', () => {
    expect(errorOf(() => completionBudget(4, 2045, 2048))).toMatchObject({ status: 400, param: 'max_tokens', message: expect.stringMatching(/at most 2044/) });
  });

  it('blames messages when the prompt alone fills the context', () => {
    expect(errorOf(() => completionBudget(2048, undefined, 2048))).toMatchObject({ status: 400, param: 'messages' });
    expect(errorOf(() => completionBudget(3000, 1, 2048))).toMatchObject({ status: 400, param: 'messages' });
  });
});
