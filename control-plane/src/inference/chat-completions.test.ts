import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../models/catalog.js';
import { upstreamBody } from './chat-completions.js';

const llama: CatalogModel = {
  id: 'llama', kind: 'chat', created: 0, owned_by: 'svc', family: 'llama', context_window: 4096, quantizations: ['fp16'], rate_card_id: 'rc',
  serving: { engine: 'vllm', image: 'vllm:1', gpus: 1, weights: {} },
};

describe('upstreamBody', () => {
  it('passes response_format and forced tool choices to the engine as the client sent them, with the spec defaults filled in', () => {
    const response_format = { type: 'json_schema' as const, json_schema: { name: 'x', strict: true, schema: { type: 'object', properties: {}, required: [], additionalProperties: false } } };
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object' } } }];
    const body = upstreamBody({ model: llama, maxTokens: 9, body: { model: 'llama', messages: [{ role: 'user', content: 'hi' }], response_format, tools, tool_choice: 'required', frequency_penalty: 0.5, logit_bias: { '7': -100 } } }, false);
    expect(body).toEqual({
      model: 'llama', messages: [{ role: 'user', content: 'hi' }], temperature: 0.7, top_p: 1, top_k: 0, max_tokens: 9,
      response_format, tools, tool_choice: 'required', frequency_penalty: 0.5, logit_bias: { '7': -100 },
    });
  });
});
