// Request translation, pure: a Responses request (plus the conversation of the response
// it chains on, and the stored items it references) becomes one chat-completion request.
// Every engine serves chat completions, so every field below has one meaning everywhere.
// Each message remembers which request field it came from, so a refusal of the chat
// checks can name the field the client actually sent.
import type { ResponseFormat } from '../response-format.js';
import { ApiError } from '@svc/shared';
import type { ChatCompletionRequest, ChatMessage } from '../chat-request.js';
import { MAX_INPUT_ITEMS, type ResponsesRequest } from './request.js';

type Fail = (message: string, param: string) => never;
const fail: Fail = (message, param) => {
  throw new ApiError('invalid_request', message, { param });
};

type ToolCall = NonNullable<ChatMessage['tool_calls']>[number];
type Obj = Record<string, unknown>;

/** A chat message and the request field it came from. */
export interface SourcedMessage {
  message: ChatMessage;
  source: string;
}

/** Output items of stored responses that input `item_reference`s name, by item id. */
export type ItemLookup = (id: string) => Obj | undefined;

export interface ChatTranslation {
  /** The chat request; `response_format` is set only when text.format asks for JSON. */
  chat: ChatCompletionRequest;
  /** Where each of chat.messages came from (same order). */
  sources: string[];
  /** The conversation this request adds to (previous history + input), instructions left out: what a chained response starts from. */
  history: ChatMessage[];
}

const CALL_ID = /^.{1,256}$/s;
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const INPUT_ROLES: Record<string, ChatMessage['role']> = { user: 'user', system: 'system', developer: 'system', assistant: 'assistant' };

/** The ids named by `item_reference` items, for the caller to look up before translating. */
export function referencedItemIds(input: ResponsesRequest['input']): string[] {
  if (typeof input === 'string') return [];
  return input.filter((item) => (item as Obj).type === 'item_reference' && typeof (item as Obj).id === 'string').map((item) => (item as Obj).id as string);
}

/** Text of a content value: a string, or text parts (input_text, output_text); other parts are refused. */
function contentText(content: unknown, at: string): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) fail('content must be a string or a list of input_text parts', at);
  return (content as unknown[])
    .map((part, j) => {
      const p = part as Obj;
      const where = `${at}[${j}]`;
      if (typeof p !== 'object' || p === null) fail('a content part must be an object', where);
      if (p.type !== 'input_text' && p.type !== 'output_text') {
        fail(`content part type ${JSON.stringify(p.type)} is not supported: the models read text only (input_text)`, `${where}.type`);
      }
      if (typeof p.text !== 'string') fail('a text part needs a string text', `${where}.text`);
      return p.text as string;
    })
    .join('');
}

/**
 * The input items as chat messages. Consecutive function_call items become one assistant
 * message with several tool_calls (joined to the assistant text right before them), as a
 * chat model expects them.
 */
export function inputMessages(input: ResponsesRequest['input'], lookup: ItemLookup): SourcedMessage[] {
  if (typeof input === 'string') return [{ message: { role: 'user', content: input }, source: 'input' }];
  const out: SourcedMessage[] = [];
  const addCall = (call: ToolCall, source: string) => {
    const last = out.at(-1);
    if (last?.message.role === 'assistant') {
      last.message.tool_calls = [...(last.message.tool_calls ?? []), call];
    } else {
      out.push({ message: { role: 'assistant', content: null, tool_calls: [call] }, source });
    }
  };
  const add = (raw: unknown, at: string, source: string): void => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail('an input item must be an object', at);
    const item = raw as Obj;
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    switch (type) {
      case 'message': {
        const role = INPUT_ROLES[String(item.role)];
        if (!role) fail(`role must be one of: user, system, developer, assistant`, `${at}.role`);
        const text = contentText(item.content, `${at}.content`);
        out.push({ message: { role: role!, content: text }, source });
        return;
      }
      case 'function_call': {
        if (typeof item.call_id !== 'string' || !CALL_ID.test(item.call_id)) fail('call_id must be a string of 1 to 256 characters', `${at}.call_id`);
        if (typeof item.name !== 'string' || !FUNCTION_NAME.test(item.name)) fail('name must be a function name (letters, digits, _ and -, up to 64)', `${at}.name`);
        if (typeof item.arguments !== 'string') fail('arguments must be a JSON string', `${at}.arguments`);
        addCall({ id: item.call_id as string, type: 'function', function: { name: item.name as string, arguments: item.arguments as string } }, source);
        return;
      }
      case 'function_call_output': {
        if (typeof item.call_id !== 'string' || !CALL_ID.test(item.call_id)) fail('call_id must be a string of 1 to 256 characters', `${at}.call_id`);
        const output = contentText(item.output, `${at}.output`);
        out.push({ message: { role: 'tool', content: output, tool_call_id: item.call_id as string }, source });
        return;
      }
      case 'item_reference': {
        if (source !== at) fail('an item_reference cannot name another reference', at);
        const found = typeof item.id === 'string' ? lookup(item.id) : undefined;
        if (!found) throw new ApiError('not_found', `no stored response item ${JSON.stringify(item.id)} in your organization (expired, deleted, or stored with store: false)`, { param: `${at}.id` });
        add(found, at, at);
        return;
      }
      default:
        fail(
          `${type === undefined ? 'an input item needs a type' : `input item type ${JSON.stringify(type)} is not supported`}: send message, function_call, function_call_output or item_reference items`,
          `${at}.type`,
        );
    }
  };
  (input as unknown[]).forEach((item, i) => add(item, `input[${i}]`, `input[${i}]`));
  return out;
}

/** Function tools in chat form; built-in tools (web_search, file_search, ...) are refused by name. */
export function chatTools(tools: ResponsesRequest['tools']): ChatCompletionRequest['tools'] {
  if (tools === undefined) return undefined;
  return tools.map((raw, i) => {
    const tool = raw as Obj;
    const at = `tools[${i}]`;
    if (tool.type !== 'function') {
      fail(`tool type ${JSON.stringify(tool.type)} is not supported: only function tools; built-in tools run on OpenAI's own servers`, `${at}.type`);
    }
    for (const key of Object.keys(tool)) {
      if (!['type', 'name', 'description', 'parameters', 'strict'].includes(key)) fail(`unsupported field: ${at}.${key}`, `${at}.${key}`);
    }
    if (typeof tool.name !== 'string' || !FUNCTION_NAME.test(tool.name)) fail('name must be a function name (letters, digits, _ and -, up to 64)', `${at}.name`);
    if (tool.description !== undefined && tool.description !== null && (typeof tool.description !== 'string' || tool.description.length > 4096)) {
      fail('description must be a string of at most 4096 characters', `${at}.description`);
    }
    const parameters = tool.parameters;
    if (parameters !== undefined && parameters !== null && (typeof parameters !== 'object' || Array.isArray(parameters))) fail('parameters must be a JSON Schema object', `${at}.parameters`);
    if (tool.strict !== undefined && tool.strict !== null && typeof tool.strict !== 'boolean') fail('strict must be a boolean', `${at}.strict`);
    const fn: NonNullable<ChatCompletionRequest['tools']>[number]['function'] = { name: tool.name as string };
    if (typeof tool.description === 'string') fn.description = tool.description;
    if (parameters) fn.parameters = parameters as Obj;
    if (typeof tool.strict === 'boolean') fn.strict = tool.strict;
    return { type: 'function' as const, function: fn };
  });
}

export function chatToolChoice(choice: ResponsesRequest['tool_choice']): ChatCompletionRequest['tool_choice'] {
  if (choice === undefined || typeof choice === 'string') return choice;
  if (choice.type !== 'function') fail(`tool_choice type ${JSON.stringify(choice.type)} is not supported: use none, auto, required or {type: "function", name}`, 'tool_choice');
  if (typeof choice.name !== 'string' || !FUNCTION_NAME.test(choice.name)) fail('tool_choice needs the name of a function tool', 'tool_choice.name');
  return { type: 'function', function: { name: choice.name! } };
}

/** text.format as chat's response_format (undefined for plain text). */
export function chatResponseFormat(format: NonNullable<ResponsesRequest['text']>['format']): ResponseFormat | undefined {
  if (format === undefined || format.type === 'text') {
    for (const key of ['name', 'schema', 'strict', 'description'] as const) {
      if (format?.[key] !== undefined) fail(`text.format.${key} is only allowed with type json_schema`, `text.format.${key}`);
    }
    return undefined;
  }
  if (format.type === 'json_object') {
    for (const key of ['name', 'schema', 'strict', 'description'] as const) {
      if (format[key] !== undefined) fail(`text.format.${key} is only allowed with type json_schema`, `text.format.${key}`);
    }
    return { type: 'json_object' };
  }
  if (format.name === undefined) fail('a json_schema format needs a name', 'text.format.name');
  if (format.schema === undefined) fail('a json_schema format needs a schema', 'text.format.schema');
  const jsonSchema: Extract<ResponseFormat, { type: 'json_schema' }>['json_schema'] = { name: format.name!, schema: format.schema as Record<string, unknown> };
  if (format.strict !== undefined && format.strict !== null) jsonSchema.strict = format.strict;
  if (format.description !== undefined) jsonSchema.description = format.description;
  return { type: 'json_schema', json_schema: jsonSchema };
}

/** The whole translation. `previous` is the stored conversation of previous_response_id, if any. */
export function toChatRequest(body: ResponsesRequest, previous: readonly ChatMessage[], lookup: ItemLookup): ChatTranslation {
  const input = inputMessages(body.input, lookup);
  const history = [...previous.map((message) => structuredClone(message)), ...input.map((m) => m.message)];
  const sources = [
    ...(typeof body.instructions === 'string' ? ['instructions'] : []),
    ...previous.map(() => 'previous_response_id'),
    ...input.map((m) => m.source),
  ];
  const messages: ChatMessage[] = [...(typeof body.instructions === 'string' ? [{ role: 'system' as const, content: body.instructions }] : []), ...history];
  if (messages.length === 0) fail('input is empty: send at least one item', 'input');
  if (messages.length > MAX_INPUT_ITEMS) {
    fail(`the conversation has ${messages.length} messages (previous_response_id's included); at most ${MAX_INPUT_ITEMS}`, previous.length > 0 ? 'previous_response_id' : 'input');
  }
  const chat: ChatTranslation['chat'] = { model: body.model, messages };
  const tools = chatTools(body.tools);
  if (tools !== undefined && tools.length > 0) chat.tools = tools;
  const toolChoice = chatToolChoice(body.tool_choice);
  if (toolChoice !== undefined) chat.tool_choice = toolChoice;
  // Responses default to parallel calls allowed; chat takes the flag only with tools.
  if (chat.tools && typeof body.parallel_tool_calls === 'boolean') chat.parallel_tool_calls = body.parallel_tool_calls;
  if (typeof body.max_output_tokens === 'number') chat.max_tokens = body.max_output_tokens;
  if (typeof body.temperature === 'number') chat.temperature = body.temperature;
  if (typeof body.top_p === 'number') chat.top_p = body.top_p;
  if (body.quantization !== undefined) chat.quantization = body.quantization;
  if (body.user !== undefined) chat.user = body.user;
  if (body.stream === true) chat.stream = true;
  const format = chatResponseFormat(body.text?.format);
  if (format) chat.response_format = format;
  return { chat, sources, history };
}

/** The request field a chat-level `param` points at, through the message sources and the renamed fields. */
export function responsesParam(chatParam: string, sources: readonly string[]): string {
  const message = /^messages\[(\d+)\]/.exec(chatParam);
  if (message) return sources[Number(message[1])] ?? 'input';
  const tool = /^tools\[(\d+)\]\.function(.*)$/.exec(chatParam);
  if (tool) return `tools[${tool[1]}]${tool[2]}`;
  const renamed: Record<string, string> = { max_tokens: 'max_output_tokens', max_completion_tokens: 'max_output_tokens', response_format: 'text.format', messages: 'input' };
  for (const [from, to] of Object.entries(renamed)) if (chatParam === from || chatParam.startsWith(`${from}.`)) return to + chatParam.slice(from.length);
  return chatParam;
}
