import { describe, expect, it } from 'vitest';
import { chatCompletion, contentChunk, finishChunk, roleChunk, usage, usageChunk } from './chat-response.js';
import { parseSseData, SSE_DONE, sseEvent } from './sse.js';

const meta = { id: 'chatcmpl-1', created: 1700000000, model: 'tiny-chat' };

describe('SSE framing', () => {
  it('frames each payload as one data line and a blank line', () => {
    expect(sseEvent({ a: 'line\nbreak' })).toBe('data: {"a":"line\\nbreak"}\n\n');
    expect(SSE_DONE).toBe('data: [DONE]\n\n');
  });

  it('parses back what it frames, in order', () => {
    const body = sseEvent({ n: 1 }) + sseEvent({ n: 2 }) + SSE_DONE;
    expect(parseSseData(body)).toEqual(['{"n":1}', '{"n":2}', '[DONE]']);
  });
});

describe('chat completion shapes', () => {
  it('builds the non-streamed response', () => {
    expect(chatCompletion(meta, 'def', 'stop', usage(4, 3))).toEqual({
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1700000000,
      model: 'tiny-chat',
      choices: [{ index: 0, message: { role: 'assistant', content: 'def' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 },
    });
  });

  it('builds role, content, finish and usage chunks', () => {
    const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1700000000, model: 'tiny-chat' };
    expect(roleChunk(meta)).toEqual({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    expect(contentChunk(meta, 'd')).toEqual({ ...base, choices: [{ index: 0, delta: { content: 'd' }, finish_reason: null }] });
    expect(finishChunk(meta, 'length')).toEqual({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'length' }] });
    expect(usageChunk(meta, usage(1, 2))).toEqual({ ...base, choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } });
  });
});
