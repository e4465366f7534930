import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../chat-request.js';
import { inputItemsOf, pageOfItems } from './input-items.js';

const conversation = [
  { role: 'system', content: 'be brief' },
  { role: 'user', content: [{ type: 'text', text: 'Weather ' }, { type: 'text', text: 'in Oslo?' }] },
  { role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"celsius":3}' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
] as unknown as ChatMessage[];

describe('inputItemsOf', () => {
  it("gives each message, call and call output OpenAI's item shape, oldest first, with ids stable per response", () => {
    expect(inputItemsOf('resp_abc', conversation)).toEqual([
      { id: 'msg_abc_in0', type: 'message', role: 'system', status: 'completed', content: [{ type: 'input_text', text: 'be brief' }] },
      { id: 'msg_abc_in1', type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'Weather in Oslo?' }] },
      { id: 'msg_abc_in2', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Let me look.', annotations: [] }] },
      { id: 'fc_abc_in2_0', type: 'function_call', status: 'completed', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { id: 'fco_abc_in3', type: 'function_call_output', status: 'completed', call_id: 'call_1', output: '{"celsius":3}' },
      { id: 'fc_abc_in4_0', type: 'function_call', status: 'completed', call_id: 'call_2', name: 'get_time', arguments: '{}' },
    ]);
  });
});

describe('pageOfItems', () => {
  const items = inputItemsOf('resp_abc', conversation);
  const ids = (page: { data: Array<{ id: string }> }) => page.data.map((item) => item.id);

  it.each([
    ['newest first by default, 20 at most', {}, ['fc_abc_in4_0', 'fco_abc_in3', 'fc_abc_in2_0', 'msg_abc_in2', 'msg_abc_in1', 'msg_abc_in0'], false],
    ['oldest first, two', { order: 'asc' as const, limit: 2 }, ['msg_abc_in0', 'msg_abc_in1'], true],
    ['after an item, in the order asked', { order: 'asc' as const, after: 'msg_abc_in1', limit: 2 }, ['msg_abc_in2', 'fc_abc_in2_0'], true],
    ['after the last item: nothing more', { after: 'msg_abc_in0' }, [], false],
  ])('%s', (_name, query, expected, more) => {
    const page = pageOfItems(items, query);
    expect(ids(page)).toEqual(expected);
    expect(page).toMatchObject({ object: 'list', has_more: more, first_id: expected[0] ?? null, last_id: expected.at(-1) ?? null });
  });

  it('refuses an `after` that is no item of the response, naming it', () => {
    expect(() => pageOfItems(items, { after: 'msg_other_in0' })).toThrow(expect.objectContaining({ type: 'invalid_request', param: 'after' }));
  });
});
