// The Engine over node-llama-cpp: loads one GGUF model on the CPU with an
// explicit thread count, runs chat generation on a context with --parallel
// sequences (one per request, queued beyond that) and embeddings on a pool of
// embedding contexts. The only module that touches the native addon.
import {
  getLlama, LlamaGrammarEvaluationState, LlamaLogLevel, TokenBias,
  type Llama, type LlamaContextSequence, type LlamaEmbeddingContext, type LlamaGrammar, type LlamaModel, type Token,
} from 'node-llama-cpp';
import { ApiError } from '../../shared/src/errors.js';
import type { EngineConfig } from './args.js';
import type { ChatMessage } from './chat-request.js';
import { ChatTemplate } from './chat-template.js';
import type { Engine, GenerationResult, Prompt, SamplingOptions, StartSink, TextSink, TokenSink } from './engine.js';
import { constraintKey, grammarSchemaFor, patchGrammar, type Constraint } from './json-grammar.js';
import { ContextProgress } from './progress.js';
import { SlotPool } from './slot-pool.js';
import { StopMatcher } from './stop-matcher.js';

export type LogFn = (level: 'info' | 'warn' | 'error', msg: string) => void;

/** Tokens of context given to the detokenizer so word-initial spaces come out right. */
const DETOKENIZE_CONTEXT = 8;

/**
 * llama.cpp messages that are expected for these models and would only alarm an
 * operator. WordPiece detokenizes with word-initial spaces (embeddings never
 * detokenize); the embedding context is one token longer than the model's
 * training context so that an input of exactly that length fits, and the
 * engine itself refuses longer inputs.
 */
const EXPECTED_EMBED_WARNINGS = [/tokenize text and then detokenize it resulted in a different text/, /possible training context overflow/];

/** Compiled grammars kept per schema: a client repeating its schema pays compilation once. */
const GRAMMAR_CACHE_SIZE = 64;
/** Generated tokens the penalty sampler looks back over (llama.cpp's default). */
const PENALTY_LAST_N = 64;
/** Tokens the sequences of a context have put into decode batches (metered as a batch starts). */
function metered(sequences: readonly LlamaContextSequence[]): number {
  let total = 0;
  for (const { tokenMeter } of sequences) total += tokenMeter.usedInputTokens + tokenMeter.usedOutputTokens;
  return total;
}

/**
 * No sequence of the context made progress for the watchdog's allowance while this
 * request's token was being evaluated. llama.cpp cannot interrupt the evaluation (the
 * sampler runs in a native worker, and node-llama-cpp decodes every sequence of the context
 * in one batch, waiting for each one's sampling): the request fails now, its sequence is
 * released once the evaluation returns, and the engine reports itself stalled meanwhile.
 */
class Stall extends Error {
  constructor(readonly pending: Promise<unknown>, readonly tokens: AsyncIterator<unknown>, readonly allowance: number) {
    super('stalled');
  }
}

interface Parts {
  tokenTimeoutMs: number;
  maxGrammarAmbiguity: number;
  llama: Llama;
  model: LlamaModel;
  contextSize: number;
  /** Chat models: the template, and one sequence per --parallel slot. */
  chat?: { template: ChatTemplate; sequences: SlotPool<LlamaContextSequence>; progress: ContextProgress };
  /** Embedding models: one context per --parallel slot. */
  embed?: { contexts: LlamaEmbeddingContext[]; pool: SlotPool<LlamaEmbeddingContext> };
  dispose: () => Promise<void>;
}

export class LlamaEngine implements Engine {
  readonly contextSize: number;

  private constructor(private readonly parts: Parts) {
    this.contextSize = parts.contextSize;
  }

  static async load(config: EngineConfig, log: LogFn): Promise<LlamaEngine> {
    const quiet = config.task === 'embed' ? EXPECTED_EMBED_WARNINGS : [];
    const llama = await getLlama({
      gpu: false,
      build: 'never',
      skipDownload: true,
      progressLogs: false,
      maxThreads: config.threads,
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => {
        const text = message.trim();
        if (!text || quiet.some((re) => re.test(text))) return;
        log(level === LlamaLogLevel.error || level === LlamaLogLevel.fatal ? 'error' : 'warn', `llama.cpp: ${text}`);
      },
    });
    const model = await llama.loadModel({ modelPath: config.model });
    const trained = model.trainContextSize;

    if (config.task === 'embed') {
      // Learned position embeddings (BERT) end at the training context: never go past it.
      const limit = Math.min(config.ctxSize ?? trained, trained);
      if (config.ctxSize !== undefined && config.ctxSize > trained) {
        log('warn', `--ctx-size ${config.ctxSize} exceeds the model's training context; using ${trained}`);
      }
      const contexts: LlamaEmbeddingContext[] = [];
      for (let i = 0; i < config.parallel; i++) {
        // +1: node-llama-cpp wants inputs strictly shorter than the context.
        contexts.push(await model.createEmbeddingContext({ contextSize: limit + 1, threads: config.threads }));
      }
      return new LlamaEngine({
        tokenTimeoutMs: config.tokenTimeoutMs,
        maxGrammarAmbiguity: config.maxGrammarAmbiguity,
        llama,
        model,
        contextSize: limit,
        embed: { contexts, pool: new SlotPool(contexts) },
        dispose: async () => {
          for (const c of contexts) await c.dispose();
          await model.dispose();
          await llama.dispose();
        },
      });
    }

    const context = await model.createContext({
      contextSize: config.ctxSize ?? trained,
      sequences: config.parallel,
      threads: config.threads,
    });
    const sequences = Array.from({ length: config.parallel }, () => context.getSequence());
    const source = model.fileInfo.metadata.tokenizer?.chat_template;
    const template = new ChatTemplate(typeof source === 'string' ? source : undefined, {
      bos: model.tokens.bosString ?? '',
      eos: model.tokens.eosString ?? '',
    });
    return new LlamaEngine({
      tokenTimeoutMs: config.tokenTimeoutMs,
      maxGrammarAmbiguity: config.maxGrammarAmbiguity,
      llama,
      model,
      contextSize: context.contextSize,
      chat: { template, sequences: new SlotPool(sequences), progress: new ContextProgress(config.tokenTimeoutMs, () => metered(sequences)) },
      dispose: async () => {
        await context.dispose();
        await model.dispose();
        await llama.dispose();
      },
    });
  }

  /** Insertion-ordered, so the first key is the least recently used. */
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();

  async prepare(constraint: Constraint): Promise<void> {
    await this.grammarFor(constraint);
  }

  private async grammarFor(constraint: Constraint): Promise<LlamaGrammar | undefined> {
    if (constraint.kind === 'none') return undefined;
    const key = constraintKey(constraint);
    let grammar = this.grammars.get(key);
    if (grammar) {
      this.grammars.delete(key);
    } else {
      const schema = grammarSchemaFor(constraint, this.parts.maxGrammarAmbiguity)!; // throws the 400 for what it cannot enforce
      grammar = (async () => {
        try {
          const generated = await this.parts.llama.createGrammarForJsonSchema(schema as never); // its generic type wants a literal schema
          return await this.parts.llama.createGrammar({ grammar: patchGrammar(generated.grammar) });
        } catch (err) {
          // The request's schema, not this server: a 500 would have the control plane take
          // this replica out of service and try the next one with the same schema.
          throw new ApiError('invalid_request', `the schema cannot be compiled into a grammar: ${(err as Error).message}`);
        }
      })();
      // A failed compilation is not cached: the next request tries again.
      grammar.catch(() => this.grammars.delete(key));
    }
    this.grammars.set(key, grammar);
    while (this.grammars.size > GRAMMAR_CACHE_SIZE) this.grammars.delete(this.grammars.keys().next().value!);
    return grammar;
  }

  private get vocabularySize(): number {
    const tokens = this.model.fileInfo.metadata.tokenizer?.ggml?.tokens;
    return Array.isArray(tokens) ? tokens.length : 0;
  }

  private get model(): LlamaModel {
    return this.parts.model;
  }

  private requireChat(): NonNullable<Parts['chat']> {
    if (!this.parts.chat) throw new ApiError('invalid_request', 'this model serves embeddings, not chat completions', { param: 'model' });
    return this.parts.chat;
  }

  private requireEmbed(): NonNullable<Parts['embed']> {
    if (!this.parts.embed) throw new ApiError('invalid_request', 'this model serves chat completions, not embeddings', { param: 'model' });
    return this.parts.embed;
  }

  chatPrompt(messages: readonly ChatMessage[]): Prompt {
    const { template } = this.requireChat();
    let text: string;
    try {
      text = template.render(messages);
    } catch (err) {
      throw new ApiError('invalid_request', `the model's chat template cannot render these messages: ${(err as Error).message}`, { param: 'messages' });
    }
    const tokens = this.model.tokenize(text, true);
    const bos = this.model.tokens.bos;
    // As llama-server: add BOS when the model wants one, unless the template already wrote it.
    if (bos !== null && this.model.tokens.shouldPrependBosToken && tokens[0] !== bos) tokens.unshift(bos);
    return { tokens };
  }

  /** Requests failed by the watchdog whose sequence is not yet released. */
  private stalls = 0;

  isStalled(): boolean {
    return this.stalls > 0 || (this.parts.chat?.progress.stalled() ?? false);
  }

  async generate(prompt: Prompt, options: SamplingOptions, onText: TextSink, signal: AbortSignal, onToken?: TokenSink, onStart?: StartSink): Promise<GenerationResult> {
    const { sequences } = this.requireChat();
    let sequence: LlamaContextSequence;
    try {
      sequence = await sequences.acquire(signal);
    } catch (err) {
      if (signal.aborted) return { finishReason: 'aborted', completionTokens: 0 };
      throw err;
    }
    let stall: Stall | undefined;
    try {
      return await this.run(sequence, prompt, options, onText, signal, onToken, onStart);
    } catch (err) {
      if (!(err instanceof Stall)) throw err;
      stall = err;
      this.stalls++;
      const { allowance } = err;
      // Under a grammar the request's own schema is the likely cause: the client's fault, not
      // a reason to try another replica. Without one it waited on another request's token.
      throw options.constraint.kind === 'none'
        ? new ApiError('service_unavailable', `generation stalled: the engine made no progress for ${allowance} ms while another request held it; retry`)
        : new ApiError('invalid_request', `generation stalled: the engine made no progress for ${allowance} ms under this request's grammar; the schema is too expensive to enforce here (simplify its nested anyOf unions)`);
    } finally {
      const release = async () => {
        // The next request starts from an empty sequence.
        await sequence.clearHistory();
        sequences.release(sequence);
      };
      if (!stall) await release();
      else {
        // The sequence is busy until the native evaluation returns; only then is it freed.
        const { pending, tokens } = stall;
        void pending
          .catch(() => undefined)
          .then(() => tokens.return?.())
          .catch(() => undefined)
          .then(release)
          .catch(() => undefined)
          .finally(() => { this.stalls--; });
      }
    }
  }

  private async run(
    sequence: LlamaContextSequence,
    prompt: Prompt,
    options: SamplingOptions,
    onText: TextSink,
    signal: AbortSignal,
    onToken: TokenSink | undefined,
    onStart: StartSink | undefined,
  ): Promise<GenerationResult> {
    const stop = new StopMatcher(options.stop);
    let completionTokens = 0;
    let recent: Token[] = prompt.tokens.slice(-DETOKENIZE_CONTEXT) as Token[];
    let pending: Token[] = [];
    let finishReason: GenerationResult['finishReason'] = 'length';
    let stopped = false;

    const emit = async (text: string): Promise<void> => {
      const out = stop.push(text);
      if (out.text) await onText(out.text, completionTokens);
      stopped = out.stopped;
    };

    const grammar = await this.grammarFor(options.constraint);
    const generated: Token[] = [];
    const penalize = options.frequencyPenalty !== 0 || options.presencePenalty !== 0;
    let bias: TokenBias | undefined;
    if (options.logitBias.size > 0) {
      bias = new TokenBias(this.model.tokenizer);
      for (const [token, logit] of options.logitBias) {
        if (token >= this.vocabularySize) continue; // no such token: nothing to bias (llama.cpp would index past its logits)
        bias.set(token as Token, logit <= -100 ? 'never' : { logit });
      }
    }
    const tokens = sequence.evaluate(prompt.tokens as Token[], {
      temperature: options.temperature,
      topP: options.topP,
      topK: options.topK,
      ...(options.seed !== undefined ? { seed: options.seed } : {}),
      ...(grammar ? { grammarEvaluationState: new LlamaGrammarEvaluationState({ model: this.model, grammar }) } : {}),
      ...(penalize
        ? {
          repeatPenalty: {
            punishTokens: () => generated.slice(-PENALTY_LAST_N),
            maxPunishTokens: PENALTY_LAST_N,
            penalty: 1,
            frequencyPenalty: options.frequencyPenalty,
            presencePenalty: options.presencePenalty,
          },
        }
        : {}),
      ...(bias ? { tokenBias: bias } : {}),
      yieldEogToken: true,
    });
    // The watchdog: each token's evaluation is raced against the context's progress. It fails
    // only when no sequence of the context returned a token, and no decode batch started, for
    // the bound (one more per PROMPT_TOKENS_PER_BOUND prompt tokens pending in the context):
    // a batch of N requests is N times slower, not stalled.
    const iterator = tokens[Symbol.asyncIterator]();
    const { progress } = this.requireChat();
    let started = false;
    const start = async () => {
      if (started) return;
      started = true;
      await onStart?.();
    };
    try {
      for (;;) {
        // Its first token evaluates the prompt, until then pending in the context.
        const next = progress.track(iterator.next(), started ? 0 : prompt.tokens.length);
        const watch = progress.watch();
        const step = await Promise.race([next, watch.stalled]).finally(watch.cancel);
        if (step === 'stalled') throw new Stall(next, iterator, progress.allowance());
        if (step.done) break;
        const token = step.value;
        if (!started && !signal.aborted) await start();
        if (signal.aborted) {
          finishReason = 'aborted';
          break;
        }
        if (this.model.isEogToken(token)) {
          finishReason = 'stop';
          break;
        }
        completionTokens++;
        generated.push(token);
        pending.push(token);
        await onToken?.(completionTokens);
        const text = this.model.detokenize(pending, false, recent);
        // An incomplete UTF-8 character (byte tokens) waits for the rest of its bytes.
        if (!text.endsWith('\uFFFD')) {
          recent = [...recent, ...pending].slice(-DETOKENIZE_CONTEXT);
          pending = [];
          await emit(text);
          if (stopped) {
            finishReason = 'stop';
            break;
          }
        }
        if (completionTokens >= options.maxTokens) break;
      }
    } catch (err) {
      // A stalled evaluation is still running: its iterator is closed once it returns.
      if (!(err instanceof Stall)) await iterator.return?.();
      throw err;
    }
    await iterator.return?.();
    if (finishReason !== 'aborted') await start();
    if (finishReason !== 'aborted' && !stopped) {
      // Generation ended on its own: bytes of a cut-off character, and text
      // held back as a possible stop sequence, are output after all.
      if (pending.length) await emit(this.model.detokenize(pending, false, recent));
      if (stopped) finishReason = 'stop';
      const rest = stop.flush();
      if (rest) await onText(rest, completionTokens);
    }
    return { finishReason, completionTokens };
  }

  embeddingTokens(input: string): number {
    // Tokenizing needs no evaluation slot: any context counts the same.
    return this.requireEmbed().contexts[0]!.calculateInputLength(input);
  }

  async embed(inputs: readonly string[], signal: AbortSignal): Promise<number[][]> {
    const { pool } = this.requireEmbed();
    return Promise.all(inputs.map((input) => pool.with(signal, async (ctx) => [...(await ctx.getEmbeddingFor(input)).vector])));
  }

  dispose(): Promise<void> {
    return this.parts.dispose();
  }
}
