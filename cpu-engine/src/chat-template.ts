// Turns chat messages into the prompt text, with the model's own Jinja chat
// template (tokenizer.chat_template in the GGUF), the way llama-server and vLLM
// do. A model without a template gets ChatML, llama.cpp's default.
import { Template } from '@huggingface/jinja';
import type { ChatMessage } from './chat-request.js';

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface SpecialTokens {
  bos: string;
  eos: string;
}

export class ChatTemplate {
  private readonly template: Template;

  constructor(source: string | undefined, private readonly special: SpecialTokens) {
    // Parse once at start-up: a broken template fails the engine's start, not each request.
    this.template = new Template(source ?? CHATML_TEMPLATE);
  }

  render(messages: readonly ChatMessage[]): string {
    return this.template.render({
      messages,
      add_generation_prompt: true,
      bos_token: this.special.bos,
      eos_token: this.special.eos,
      // raise_exception(), which templates call to refuse a conversation (roles
      // out of order, ...), is built into the Jinja runtime and throws.
    });
  }
}
