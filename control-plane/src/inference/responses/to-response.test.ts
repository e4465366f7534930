import { describe, expect, it } from 'vitest';
import { finishedResponse, itemId, outputItems, outputMessages, responseBase, responseOfItem } from './to-response.js';

const base = responseBase({
  id: 'resp_R1',
  createdAt: 5,
  body: { model: 'm', input: 'x', instructions: 'be brief', metadata: { a: 'b' }, store: false, tools: [{ type: 'function', name: 'f' }] },
  pool: 'eu',
  sampling: { temperature: 0.7, top_p: 1 },
});

describe('outputItems', () => {
  it.each<[string, Parameters<typeof outputItems>[1], unknown[]]>([
    ['text', { content: 'hi', finish_reason: 'stop' }, [{ id: 'msg_R1_0', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'hi', annotations: [], logprobs: [] }] }]],
    ['text cut at the cap', { content: 'h', finish_reason: 'length' }, [{ id: 'msg_R1_0', type: 'message', status: 'incomplete', role: 'assistant', content: [{ type: 'output_text', text: 'h', annotations: [], logprobs: [] }] }]],
    ['nothing at all is an empty message', { content: null, finish_reason: 'stop' }, [{ id: 'msg_R1_0', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: '', annotations: [], logprobs: [] }] }]],
    [
      'tool calls only',
      { content: null, tool_calls: [{ id: 'call_a', function: { name: 'f', arguments: '{"x":1}' } }], finish_reason: 'tool_calls' },
      [{ id: 'fc_R1_0', type: 'function_call', status: 'completed', call_id: 'call_a', name: 'f', arguments: '{"x":1}' }],
    ],
  ])('%s', (_name, answer, expected) => expect(outputItems('resp_R1', answer)).toEqual(expected));
});

describe('finishedResponse', () => {
  it('echoes the request and maps usage and status', () => {
    const response = finishedResponse(base, outputItems('resp_R1', { content: 'x', finish_reason: 'length' }), 'length', { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 });
    expect(response).toMatchObject({
      id: 'resp_R1',
      object: 'response',
      created_at: 5,
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      error: null,
      model: 'm',
      pool: 'eu',
      instructions: 'be brief',
      metadata: { a: 'b' },
      store: false,
      temperature: 0.7,
      top_p: 1,
      tool_choice: 'auto',
      parallel_tool_calls: true,
      tools: [{ type: 'function', name: 'f', strict: null, description: null, parameters: null }],
      text: { format: { type: 'text' } },
      usage: { input_tokens: 3, input_tokens_details: { cached_tokens: 0 }, output_tokens: 1, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 4 },
    });
  });
});

describe('outputMessages', () => {
  it.each<[string, Parameters<typeof outputItems>[1], unknown[]]>([
    ['text is one assistant message', { content: 'hi', finish_reason: 'stop' }, [{ role: 'assistant', content: 'hi' }]],
    ['an empty answer adds nothing', { content: '', finish_reason: 'stop' }, []],
    [
      'tool calls are one assistant message',
      { content: 'look', tool_calls: [{ id: 'c', function: { name: 'f', arguments: '{}' } }], finish_reason: 'tool_calls' },
      [{ role: 'assistant', content: 'look', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }],
    ],
  ])('%s', (_name, answer, expected) => expect(outputMessages(outputItems('resp_R1', answer))).toEqual(expected));
});

describe('item ids', () => {
  it.each<[string, string | undefined]>([
    [itemId('resp_Abc9', 'msg', 0), 'resp_Abc9'],
    [itemId('resp_Abc9', 'fc', 12), 'resp_Abc9'],
    ['msg_../x_0', undefined],
    ['rs_Abc9_0', undefined],
    ['msg_Abc9', undefined],
  ])('%s belongs to %s', (id, response) => expect(responseOfItem(id)).toBe(response));
});
