// GET /v1/responses/{id}/input_items: the items a stored response was generated from, in
// OpenAI's shapes, a page at a time. A response stores its whole conversation (what a
// request chaining on it continues): its input items are that conversation less what the
// response itself added, and, as OpenAI lists them, they include the turns of the responses
// it was chained on. Instructions are not items. Pure.
import { ApiError } from '@svc/shared';
import { contentText, type ChatMessage } from '../chat-request.js';

export interface InputMessageItem {
  id: string;
  type: 'message';
  role: 'user' | 'system' | 'assistant';
  status: 'completed';
  content: Array<{ type: 'input_text'; text: string } | { type: 'output_text'; text: string; annotations: [] }>;
}

export interface FunctionCallItem {
  id: string;
  type: 'function_call';
  status: 'completed';
  call_id: string;
  name: string;
  arguments: string;
}

export interface FunctionCallOutputItem {
  id: string;
  type: 'function_call_output';
  status: 'completed';
  call_id: string;
  output: string;
}

export type InputItem = InputMessageItem | FunctionCallItem | FunctionCallOutputItem;

export interface InputItemQuery {
  after?: string;
  limit?: number;
  order?: 'asc' | 'desc';
}

export interface InputItemList {
  object: 'list';
  data: InputItem[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export const DEFAULT_INPUT_ITEMS_LIMIT = 20;

/**
 * The input items of response `responseId`, oldest first, from `conversation` (its stored
 * conversation without its own output). Ids are stable: `<kind>_<response>_in<n>[_<call>]`.
 */
export function inputItemsOf(responseId: string, conversation: readonly ChatMessage[]): InputItem[] {
  const at = responseId.slice('resp_'.length);
  const items: InputItem[] = [];
  conversation.forEach((message, n) => {
    const m = message as { role: string; tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: string } }>; tool_call_id?: string };
    if (m.role === 'tool') {
      items.push({ id: `fco_${at}_in${n}`, type: 'function_call_output', status: 'completed', call_id: m.tool_call_id ?? '', output: contentText(message.content) });
      return;
    }
    const role = m.role === 'assistant' ? 'assistant' : m.role === 'user' ? 'user' : 'system';
    const text = contentText(message.content);
    if (role !== 'assistant') {
      items.push({ id: `msg_${at}_in${n}`, type: 'message', role, status: 'completed', content: [{ type: 'input_text', text }] });
      return;
    }
    if (text !== '') items.push({ id: `msg_${at}_in${n}`, type: 'message', role, status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] });
    (m.tool_calls ?? []).forEach((call, c) =>
      items.push({ id: `fc_${at}_in${n}_${c}`, type: 'function_call', status: 'completed', call_id: call.id ?? '', name: call.function?.name ?? '', arguments: call.function?.arguments ?? '' }),
    );
  });
  return items;
}

/** One page of `items` (oldest first) as OpenAI lists them: newest first unless `order` is asc, after the item `after`. */
export function pageOfItems(items: readonly InputItem[], query: InputItemQuery): InputItemList {
  const ordered = query.order === 'asc' ? items : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const index = ordered.findIndex((item) => item.id === query.after);
    if (index < 0) throw new ApiError('invalid_request', `after names no input item of this response (${query.after}); pass an id from a page of this list`, { param: 'after' });
    start = index + 1;
  }
  const limit = query.limit ?? DEFAULT_INPUT_ITEMS_LIMIT;
  const data = ordered.slice(start, start + limit);
  return { object: 'list', data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: start + limit < ordered.length };
}
