// Which chat fields each engine honours. vLLM takes the whole OpenAI chat surface; the
// project's CPU engine (llama.cpp) accepts every field but ignores those it has no use
// for, so a request that relies on one of them (a penalty, logprobs, a forced tool call)
// would get an answer that silently breaks its contract. Such requests are refused here
// with a 400 naming the field; the neutral values (penalty 0, logprobs false, an empty
// bias, tool_choice auto/none) are accepted, since SDKs send them by default.
import type { Engine } from '../models/catalog.js';
import type { ChatCompletionRequest } from './chat-request.js';

export interface EngineFeatures {
  penalties: boolean;
  logprobs: boolean;
  logitBias: boolean;
  /** Makes tool calls, so tool_choice "required" or a named function can be honoured. */
  toolCalls: boolean;
}

export const ENGINE_FEATURES: Record<Engine, EngineFeatures> = {
  vllm: { penalties: true, logprobs: true, logitBias: true, toolCalls: true },
  cpu: { penalties: false, logprobs: false, logitBias: false, toolCalls: false },
};

/** The field `body` relies on that `engine` does not honour, with why; undefined when none. */
export function engineFeatureProblem(body: ChatCompletionRequest, engine: Engine): { param: string; message: string } | undefined {
  const features = ENGINE_FEATURES[engine];
  const lacks = (what: string) => `this model's engine (${engine}) does not support ${what}`;
  if (!features.penalties) {
    for (const param of ['frequency_penalty', 'presence_penalty'] as const) {
      if ((body[param] ?? 0) !== 0) return { param, message: `${lacks(param)}; send 0 or leave it out` };
    }
  }
  if (!features.logprobs && body.logprobs === true) return { param: 'logprobs', message: lacks('logprobs') };
  if (!features.logitBias && Object.keys(body.logit_bias ?? {}).length > 0) return { param: 'logit_bias', message: lacks('logit_bias') };
  const choice = body.tool_choice;
  if (!features.toolCalls && choice !== undefined && choice !== 'auto' && choice !== 'none') {
    return { param: 'tool_choice', message: `${lacks('forced tool calls')}: it makes none; use tool_choice "auto" or "none"` };
  }
  return undefined;
}
