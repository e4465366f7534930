// What the HTTP server needs from a loaded model. llama-engine.ts implements it
// over node-llama-cpp; keeping the interface apart keeps server.ts free of the
// native module.
import type { ChatMessage } from './chat-request.js';
import type { Constraint } from './json-grammar.js';

export interface SamplingOptions {
  /** Completion tokens to generate at most (already fitted to the context). */
  maxTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  seed: number | undefined;
  stop: string[];
  frequencyPenalty: number;
  presencePenalty: number;
  logitBias: ReadonlyMap<number, number>;
  /** What the output must be; its grammar was made by prepare() (or is made again). */
  constraint: Constraint;
}

export interface GenerationResult {
  /** 'stop': end of sequence or a stop sequence; 'length': maxTokens reached; 'aborted': the signal fired. */
  finishReason: 'stop' | 'length' | 'aborted';
  completionTokens: number;
}

/** Receives generated text and the completion tokens generated so far. */
export type TextSink = (text: string, completionTokens: number) => void | Promise<void>;

/** Hears the completion tokens generated so far, after each one. */
export type TokenSink = (completionTokens: number) => void | Promise<void>;

/** Called once the request holds a slot and its prompt is evaluated, before any text. */
export type StartSink = () => void | Promise<void>;

export interface Prompt {
  tokens: readonly number[];
}

export interface Engine {
  /** Tokens per sequence: prompt plus completion (for embed: the longest input). */
  readonly contextSize: number;
  /** Renders the chat template and tokenizes; throws ApiError for messages the template rejects. */
  chatPrompt(messages: readonly ChatMessage[]): Prompt;
  /**
   * Makes (or finds cached) the grammar for a constraint before any response is sent, so a
   * schema it cannot enforce is a 400 rather than an error mid-stream.
   */
  prepare(constraint: Constraint): Promise<void>;
  /**
   * Generates into `onText` (already cut at stop sequences); waits for a free
   * slot first. `onText` may return a promise to apply backpressure; it also gets
   * the tokens generated so far (for usage on every chunk). `onToken` hears each
   * token generated, text or not (bytes of an unfinished character, a held-back call).
   * `onStart` hears that the prompt was evaluated (never for a request aborted while queued).
   * A token that takes longer than the engine's watchdog bound fails the request (ApiError).
   */
  generate(prompt: Prompt, options: SamplingOptions, onText: TextSink, signal: AbortSignal, onToken?: TokenSink, onStart?: StartSink): Promise<GenerationResult>;
  /** True while an evaluation has run past the watchdog's bound: /health answers 503. */
  isStalled?(): boolean;
  /** Tokens an embedding input takes, [CLS]/[SEP] included. */
  embeddingTokens(input: string): number;
  /** Raw (not normalised) embedding vectors, in input order. */
  embed(inputs: readonly string[], signal: AbortSignal): Promise<number[][]>;
  dispose(): Promise<void>;
}
