// Stream translation, pure: chat.completion.chunk objects in, the Responses API's semantic
// events out, numbered by `sequence_number`, in the order OpenAI sends them and the
// official SDK's accumulator requires: response.created, response.in_progress, then per
// output item its added / content-part / delta / done events, then response.completed (or
// response.incomplete at the token cap, response.failed when the model server broke off).
import type { TokenUsage } from '../usage.js';
import {
  finishedResponse,
  itemId,
  messageItem,
  responseObject,
  responseUsage,
  type FunctionCallItem,
  type MessageItem,
  type OutputItem,
  type ResponseBase,
  type ResponseObject,
} from './to-response.js';

type Event = Record<string, unknown> & { type: string; sequence_number: number };

interface ChunkChoice {
  delta?: { role?: string; content?: string | null; tool_calls?: Array<{ index?: number; id?: string; function?: { name?: string; arguments?: string } }> };
  finish_reason?: string | null;
}

export interface ChatChunk {
  choices?: ChunkChoice[];
  usage?: TokenUsage | null;
}

export class ResponseEventStream {
  private sequence = 0;
  private readonly output: OutputItem[] = [];
  /** The item receiving deltas: a message, or the function call of chat tool-call index `toolIndex`. */
  private open: { item: MessageItem; text: string } | { item: FunctionCallItem; toolIndex: number } | null = null;
  private finishReason: string | null = null;
  private usage: TokenUsage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

  constructor(private readonly base: ResponseBase) {}

  /** response.created and response.in_progress. */
  start(): Event[] {
    const snapshot = responseObject(this.base, { status: 'in_progress', error: null, incomplete_details: null, output: [], usage: null });
    return [this.event('response.created', { response: snapshot }), this.event('response.in_progress', { response: snapshot })];
  }

  push(chunk: ChatChunk): Event[] {
    const events: Event[] = [];
    if (chunk.usage) this.usage = chunk.usage;
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? {};
      if (typeof delta.content === 'string' && delta.content !== '') events.push(...this.text(delta.content));
      for (const call of delta.tool_calls ?? []) events.push(...this.toolCall(call));
      if (choice.finish_reason) this.finishReason = choice.finish_reason;
    }
    return events;
  }

  /** Closes what is open and ends with the final response (completed, or incomplete at the token cap). */
  finish(): { events: Event[]; response: ResponseObject } {
    const events = this.close();
    // A model that said nothing still answers with one (empty) message, as the non-streamed form does.
    if (this.output.length === 0) events.push(...this.text(''), ...this.close());
    const response = finishedResponse(this.base, this.output, this.finishReason, this.usage);
    events.push(this.event(response.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response }));
    return { events, response };
  }

  /** The model server broke off: the items so far, as they are, in a failed response. */
  fail(message: string): Event[] {
    const response = responseObject(this.base, {
      status: 'failed',
      error: { code: 'server_error', message },
      incomplete_details: null,
      output: this.output,
      usage: responseUsage(this.usage),
    });
    return [this.event('response.failed', { response })];
  }

  private text(delta: string): Event[] {
    const events: Event[] = [];
    if (this.open === null || this.open.item.type !== 'message') {
      events.push(...this.close());
      const item = messageItem(itemId(this.base.id, 'msg', this.output.length), '', 'in_progress');
      item.content = [];
      this.open = { item, text: '' };
      events.push(this.event('response.output_item.added', { output_index: this.output.length, item: structuredClone(item) }));
      events.push(this.event('response.content_part.added', { item_id: item.id, output_index: this.output.length, content_index: 0, part: textPart('') }));
    }
    const open = this.open as { item: MessageItem; text: string };
    open.text += delta;
    if (delta !== '') events.push(this.event('response.output_text.delta', { item_id: open.item.id, output_index: this.output.length, content_index: 0, delta, logprobs: [] }));
    return events;
  }

  private toolCall(call: NonNullable<NonNullable<ChunkChoice['delta']>['tool_calls']>[number]): Event[] {
    const events: Event[] = [];
    const toolIndex = call.index ?? 0;
    if (this.open === null || this.open.item.type !== 'function_call' || (this.open as { toolIndex: number }).toolIndex !== toolIndex) {
      events.push(...this.close());
      const item: FunctionCallItem = {
        id: itemId(this.base.id, 'fc', this.output.length),
        type: 'function_call',
        status: 'in_progress',
        call_id: call.id ?? `call_${this.base.id.slice(5)}_${toolIndex}`,
        name: call.function?.name ?? '',
        arguments: '',
      };
      this.open = { item, toolIndex };
      events.push(this.event('response.output_item.added', { output_index: this.output.length, item: structuredClone(item) }));
    }
    const item = this.open.item as FunctionCallItem;
    if (call.function?.name && item.name === '') item.name = call.function.name;
    const args = call.function?.arguments ?? '';
    if (args !== '') {
      item.arguments += args;
      events.push(this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: this.output.length, delta: args }));
    }
    return events;
  }

  /** The done events of the open item, which then joins the output. */
  private close(): Event[] {
    const open = this.open;
    if (open === null) return [];
    this.open = null;
    const index = this.output.length;
    const status = this.finishReason === 'length' ? 'incomplete' : 'completed';
    if (open.item.type === 'message') {
      const { text } = open as { text: string };
      const done = messageItem(open.item.id, text, status);
      this.output.push(done);
      return [
        this.event('response.output_text.done', { item_id: done.id, output_index: index, content_index: 0, text, logprobs: [] }),
        this.event('response.content_part.done', { item_id: done.id, output_index: index, content_index: 0, part: textPart(text) }),
        this.event('response.output_item.done', { output_index: index, item: structuredClone(done) }),
      ];
    }
    const done: FunctionCallItem = { ...open.item, status: 'completed' };
    this.output.push(done);
    return [
      this.event('response.function_call_arguments.done', { item_id: done.id, output_index: index, name: done.name, arguments: done.arguments }),
      this.event('response.output_item.done', { output_index: index, item: structuredClone(done) }),
    ];
  }

  private event(type: string, fields: Record<string, unknown>): Event {
    return { type, sequence_number: this.sequence++, ...fields };
  }
}

const textPart = (text: string) => ({ type: 'output_text' as const, text, annotations: [] as [], logprobs: [] as [] });

/** One event as SSE, named like OpenAI's (`event:` line, then the JSON). */
export const eventFrame = (event: { type: string }): string => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
