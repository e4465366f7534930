// The event stream is checked two ways: the exact order of event types for each kind of
// answer, and by the official SDK's own accumulator (the code behind responses.stream()
// and finalResponse()), which throws on any event out of order and must rebuild exactly
// the response that response.completed carries.
import { describe, expect, it } from 'vitest';
import { accumulateResponse } from 'openai/lib/responses/ResponseAccumulator';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { ResponseEventStream, eventFrame, type ChatChunk } from './stream-events.js';
import { responseBase, type ResponseObject } from './to-response.js';

const base = () => responseBase({ id: 'resp_abc', createdAt: 1_700_000_000, body: { model: 'tiny-chat', input: 'hi' }, pool: 'na', sampling: { temperature: 0.7, top_p: 1 } });
const text = (content: string): ChatChunk => ({ choices: [{ delta: { content } }] });
const finish = (reason: string, usage = { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 }): ChatChunk[] => [{ choices: [{ delta: {}, finish_reason: reason }] }, { choices: [], usage }];
const call = (index: number, args: string, head?: { id: string; name: string }): ChatChunk => ({
  choices: [{ delta: { tool_calls: [{ index, ...(head ? { id: head.id, function: { name: head.name, arguments: args } } : { function: { arguments: args } }) }] } }],
});

function run(chunks: ChatChunk[]): { events: Array<Record<string, any>>; response: ResponseObject } {
  const stream = new ResponseEventStream(base());
  const events = [...stream.start(), ...chunks.flatMap((c) => stream.push(c))];
  const done = stream.finish();
  return { events: [...events, ...done.events], response: done.response };
}

/** What the SDK rebuilds from the events (its output_text helper removed for comparison). */
function accumulated(events: Array<Record<string, any>>): Record<string, unknown> {
  let snapshot: any;
  for (const event of events) snapshot = accumulateResponse(event as unknown as ResponseStreamEvent, snapshot);
  const { output_text: _text, ...rest } = snapshot;
  return rest;
}

describe('ResponseEventStream', () => {
  it('streams text in the order the SDK expects and ends with the usage', () => {
    const { events, response } = run([{ choices: [{ delta: { role: 'assistant', content: '' } }] }, text('de'), text('f'), ...finish('stop')]);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[6]).toMatchObject({ text: 'def', item_id: 'msg_abc_0', output_index: 0, content_index: 0 });
    expect(response.output).toEqual([{ id: 'msg_abc_0', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'def', annotations: [], logprobs: [] }] }]);
    expect(response.usage).toEqual({ input_tokens: 4, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 6 });
    expect(accumulated(events)).toEqual(response);
  });

  it('streams tool calls as function_call items with argument deltas, one item per call', () => {
    const { events, response } = run([
      call(0, '{"ci', { id: 'call_1', name: 'weather' }),
      call(0, 'ty":"Oslo"}'),
      call(1, '{}', { id: 'call_2', name: 'time' }),
      ...finish('tool_calls'),
    ]);
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(response.output).toEqual([
      { id: 'fc_abc_0', type: 'function_call', status: 'completed', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}' },
      { id: 'fc_abc_1', type: 'function_call', status: 'completed', call_id: 'call_2', name: 'time', arguments: '{}' },
    ]);
    expect(accumulated(events)).toEqual(response);
  });

  it('text then a tool call: the message is closed before the call opens', () => {
    const { events, response } = run([text('Checking.'), call(0, '{}', { id: 'c', name: 'f' }), ...finish('tool_calls')]);
    expect(events.map((e) => e.type).slice(2)).toEqual([
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(response.output.map((i) => i.id)).toEqual(['msg_abc_0', 'fc_abc_1']);
    expect(accumulated(events)).toEqual(response);
  });

  it('ends with response.incomplete at the token cap', () => {
    const { events, response } = run([text('abc'), ...finish('length')]);
    expect(events.at(-1)!.type).toBe('response.incomplete');
    expect(response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    expect(response.output[0]!.status).toBe('incomplete');
    expect(accumulated(events)).toEqual(response);
  });

  it('an empty answer is one empty message', () => {
    const { events, response } = run(finish('stop'));
    expect(response.output).toEqual([{ id: 'msg_abc_0', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: '', annotations: [], logprobs: [] }] }]);
    expect(accumulated(events)).toEqual(response);
  });

  it('a broken stream ends with response.failed carrying the error and the items finished so far', () => {
    const stream = new ResponseEventStream(base());
    const events = [...stream.start(), ...stream.push(text('ab')), ...stream.fail('the model server broke off')];
    expect(events.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'failed', error: { code: 'server_error', message: 'the model server broke off' } } });
  });

  it('frames each event with its name, as OpenAI does', () => {
    expect(eventFrame({ type: 'response.created' })).toBe('event: response.created\ndata: {"type":"response.created"}\n\n');
  });
});
