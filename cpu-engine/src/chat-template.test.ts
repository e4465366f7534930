import { describe, expect, it } from 'vitest';
import { TINY_CHAT_TEMPLATE } from '../models/tiny-chat.js';
import { ChatTemplate } from './chat-template.js';

const special = { bos: '<s>', eos: '</s>' };

describe('ChatTemplate', () => {
  it("renders tiny-chat's template so the prompt ends with the last message's content", () => {
    const t = new ChatTemplate(TINY_CHAT_TEMPLATE, special);
    expect(t.render([
      { role: 'system', content: 'Be brief. ' },
      { role: 'user', content: 'Say abc' },
      { role: 'assistant', content: '?' },
      { role: 'user', content: 'abc' },
    ])).toBe('Be brief. Say abc?abc');
  });

  it('falls back to ChatML when the model has no template', () => {
    const t = new ChatTemplate(undefined, special);
    expect(t.render([{ role: 'user', content: 'hi' }])).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
  });

  it('passes the special tokens and the generation prompt flag to the template', () => {
    const t = new ChatTemplate('{{ bos_token }}{{ messages[0].content }}{% if add_generation_prompt %}>{% endif %}{{ eos_token }}', special);
    expect(t.render([{ role: 'user', content: 'x' }])).toBe('<s>x></s>');
  });

  it("throws when the template refuses the conversation (raise_exception)", () => {
    const t = new ChatTemplate("{% if messages[0]['role'] != 'user' %}{{ raise_exception('first message must be from the user') }}{% endif %}ok", special);
    expect(t.render([{ role: 'user', content: 'x' }])).toBe('ok');
    expect(() => t.render([{ role: 'system', content: 'x' }])).toThrow(/first message must be from the user/);
  });

  it('fails at construction on a template that does not parse', () => {
    expect(() => new ChatTemplate('{% for %}', special)).toThrow();
  });
});
