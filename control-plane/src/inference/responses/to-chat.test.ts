import { describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import type { ChatMessage } from '../chat-request.js';
import type { ResponsesRequest } from './request.js';
import { refuseUnsupported } from './request.js';
import { inputMessages, referencedItemIds, responsesParam, toChatRequest } from './to-chat.js';

const noRefs = () => undefined;
const req = (patch: Partial<ResponsesRequest>): ResponsesRequest => ({ model: 'tiny-chat', input: 'hi', ...patch });

function refusal(run: () => unknown): { type: string; param: string | undefined } {
  try {
    run();
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return { type: err.type, param: err.param };
  }
  throw new Error('expected a refusal');
}

describe('inputMessages', () => {
  it.each<[string, ResponsesRequest['input'], ChatMessage[]]>([
    ['a string is one user message', 'hello', [{ role: 'user', content: 'hello' }]],
    ['an item without type but with a role is a message', [{ role: 'user', content: 'x' }], [{ role: 'user', content: 'x' }]],
    ['developer messages are system messages', [{ type: 'message', role: 'developer', content: 'rules' }], [{ role: 'system', content: 'rules' }]],
    [
      'text parts are joined',
      [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'ab' }, { type: 'input_text', text: 'cd' }] }],
      [{ role: 'user', content: 'abcd' }],
    ],
    ['assistant output_text parts', [{ role: 'assistant', content: [{ type: 'output_text', text: 'ok', annotations: [] }] }], [{ role: 'assistant', content: 'ok' }]],
    [
      'consecutive function calls join the assistant text before them, outputs become tool messages',
      [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: 'let me look' },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call', call_id: 'c2', name: 'g', arguments: '{"a":1}' },
        { type: 'function_call_output', call_id: 'c1', output: 'one' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'two' }] },
      ],
      [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: 'let me look',
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } },
            { id: 'c2', type: 'function', function: { name: 'g', arguments: '{"a":1}' } },
          ],
        },
        { role: 'tool', content: 'one', tool_call_id: 'c1' },
        { role: 'tool', content: 'two', tool_call_id: 'c2' },
      ],
    ],
    [
      'a function call alone opens an assistant message without content',
      [{ type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}', id: 'fc_1', status: 'completed' }],
      [{ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }],
    ],
  ])('%s', (_name, input, expected) => {
    expect(inputMessages(input, noRefs).map((m) => m.message)).toEqual(expected);
  });

  it('resolves an item_reference through the lookup, and names it when unknown (404)', () => {
    const stored = { id: 'msg_R_0', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'earlier', annotations: [] }] };
    const lookup = (id: string) => (id === 'msg_R_0' ? stored : undefined);
    const input = [{ type: 'item_reference', id: 'msg_R_0' }, { role: 'user', content: 'more' }];
    expect(referencedItemIds(input)).toEqual(['msg_R_0']);
    expect(inputMessages(input, lookup).map((m) => m.message)).toEqual([{ role: 'assistant', content: 'earlier' }, { role: 'user', content: 'more' }]);
    expect(refusal(() => inputMessages([{ type: 'item_reference', id: 'msg_X_0' }], lookup))).toEqual({ type: 'not_found', param: 'input[0].id' });
  });

  it.each<[string, unknown, string]>([
    ['an image part', [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x' }] }], 'input[0].content[0].type'],
    ['an unknown role', [{ role: 'robot', content: 'x' }], 'input[0].role'],
    ['a built-in tool call item', [{ role: 'user', content: 'x' }, { type: 'web_search_call', id: 'ws' }], 'input[1].type'],
    ['a reasoning item', [{ type: 'reasoning', id: 'rs', summary: [] }], 'input[0].type'],
    ['a function call without call_id', [{ type: 'function_call', name: 'f', arguments: '{}' }], 'input[0].call_id'],
    ['a function call with a bad name', [{ type: 'function_call', call_id: 'c', name: 'no spaces', arguments: '{}' }], 'input[0].name'],
    ['function call arguments that are an object', [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }], 'input[0].arguments'],
    ['an output without call_id', [{ type: 'function_call_output', output: 'x' }], 'input[0].call_id'],
    ['content that is a number', [{ role: 'user', content: 5 }], 'input[0].content'],
    ['an item that is a string', ['hello'], 'input[0]'],
  ])('refuses %s naming %s', (_name, input, param) => {
    expect(refusal(() => inputMessages(input as ResponsesRequest['input'], noRefs))).toEqual({ type: 'invalid_request', param });
  });
});

describe('toChatRequest', () => {
  it('puts instructions first, then the previous conversation, then the input, and keeps instructions out of the history', () => {
    const previous: ChatMessage[] = [{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }];
    const { chat, sources, history } = toChatRequest(req({ instructions: 'be brief', input: 'c' }), previous, noRefs);
    expect(chat.messages).toEqual([{ role: 'system', content: 'be brief' }, ...previous, { role: 'user', content: 'c' }]);
    expect(sources).toEqual(['instructions', 'previous_response_id', 'previous_response_id', 'input']);
    expect(history).toEqual([...previous, { role: 'user', content: 'c' }]);
  });

  it.each<[string, Partial<ResponsesRequest>, Record<string, unknown>]>([
    ['max_output_tokens is max_tokens', { max_output_tokens: 7 }, { max_tokens: 7 }],
    ['sampling passes as is', { temperature: 0.2 }, { temperature: 0.2 }],
    ['nulls are left out', { temperature: null, top_p: null, max_output_tokens: null }, {}],
    ['user and quantization pass', { user: 'u1', quantization: 'fp16' }, { user: 'u1', quantization: 'fp16' }],
    ['stream', { stream: true }, { stream: true }],
    [
      'function tools take the chat shape, parallel_tool_calls with them',
      { tools: [{ type: 'function', name: 'f', description: 'd', parameters: { type: 'object' }, strict: true }], parallel_tool_calls: false, tool_choice: 'required' },
      { tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' }, strict: true } }], parallel_tool_calls: false, tool_choice: 'required' },
    ],
    ['a named tool choice', { tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'function', name: 'f' } }, { tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'f' } } }],
    ['parallel_tool_calls without tools is dropped', { parallel_tool_calls: true }, {}],
    ['text format text is plain chat', { text: { format: { type: 'text' } } }, {}],
    ['json_object', { text: { format: { type: 'json_object' } } }, { response_format: { type: 'json_object' } }],
    [
      'json_schema with strict',
      { text: { format: { type: 'json_schema', name: 'person', schema: { type: 'object' }, strict: true } } },
      { response_format: { type: 'json_schema', json_schema: { name: 'person', schema: { type: 'object' }, strict: true } } },
    ],
  ])('%s', (_name, patch, expected) => {
    const { chat } = toChatRequest(req(patch), [], noRefs);
    const { model, messages, ...rest } = chat;
    expect(model).toBe('tiny-chat');
    expect(messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(rest).toEqual(expected);
  });

  it.each<[string, Partial<ResponsesRequest>, string]>([
    ['a built-in tool', { tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    ['a file_search tool', { tools: [{ type: 'function', name: 'f' }, { type: 'file_search', vector_store_ids: [] }] }, 'tools[1].type'],
    ['an unknown field on a function tool', { tools: [{ type: 'function', name: 'f', function: {} }] }, 'tools[0].function'],
    ['a tool without a name', { tools: [{ type: 'function' }] }, 'tools[0].name'],
    ['a built-in tool choice', { tools: [{ type: 'function', name: 'f' }], tool_choice: { type: 'web_search' } }, 'tool_choice'],
    ['a json_schema format without schema', { text: { format: { type: 'json_schema', name: 'x' } } }, 'text.format.schema'],
    ['a json_schema format without name', { text: { format: { type: 'json_schema', schema: {} } } }, 'text.format.name'],
    ['a schema on json_object', { text: { format: { type: 'json_object', schema: {} } } }, 'text.format.schema'],
    ['an empty input list', { input: [] }, 'input'],
  ])('refuses %s naming %s', (_name, patch, param) => {
    expect(refusal(() => toChatRequest(req(patch), [], noRefs))).toEqual({ type: 'invalid_request', param });
  });

  it('refuses a conversation past 2,048 messages, naming previous_response_id when the history made it so', () => {
    const previous: ChatMessage[] = Array.from({ length: 2048 }, () => ({ role: 'user', content: 'x' }));
    expect(refusal(() => toChatRequest(req({}), previous, noRefs))).toEqual({ type: 'invalid_request', param: 'previous_response_id' });
  });
});

describe('responsesParam', () => {
  const sources = ['instructions', 'previous_response_id', 'input[0]', 'input[2]'];
  it.each<[string, string]>([
    ['messages[0].content', 'instructions'],
    ['messages[1].tool_call_id', 'previous_response_id'],
    ['messages[3].tool_call_id', 'input[2]'],
    ['tools[2].function.parameters', 'tools[2].parameters'],
    ['max_tokens', 'max_output_tokens'],
    ['response_format.json_schema.schema', 'text.format.json_schema.schema'],
    ['top_p', 'top_p'],
    ['tool_choice', 'tool_choice'],
  ])('%s is %s', (chat, expected) => expect(responsesParam(chat, sources)).toBe(expected));
});

describe('refuseUnsupported', () => {
  it.each<[string, Partial<ResponsesRequest>]>([
    ['background', { background: true }],
    ['reasoning', { reasoning: { effort: 'high' } }],
    ['include', { include: ['message.output_text.logprobs'] }],
    ['conversation', { conversation: 'conv_1' }],
    ['truncation', { truncation: 'auto' }],
    ['service_tier', { service_tier: 'flex' }],
    ['top_logprobs', { top_logprobs: 3 }],
    ['text.verbosity', { text: { verbosity: 'low' } }],
  ])('refuses %s by name', (param, patch) => {
    expect(refusal(() => refuseUnsupported(req(patch)))).toEqual({ type: 'invalid_request', param });
  });

  it('accepts the neutral values SDKs send by default', () => {
    expect(() => refuseUnsupported(req({ background: false, include: [], truncation: 'disabled', service_tier: 'auto', reasoning: null, top_logprobs: 0 }))).not.toThrow();
  });
});
