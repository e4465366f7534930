// The watchdog's view of one chat context: whether the engine as a whole is making
// progress. node-llama-cpp decodes every sequence of a context together in one batch, so N
// requests' tokens (or prompts) each take about N times as long as one alone: a bound per
// request would fail a busy engine that is not stalled. Any sequence's token counts as
// progress for all of them, and so does a decode batch starting (the context decodes at most
// its batch size, 512 tokens, at a time, one batch after another: a new one means the last
// one ended), seen through the tokens the context's sequences have metered.

/** Each prompt token still to evaluate in the context adds one bound per this many. */
export const PROMPT_TOKENS_PER_BOUND = 512;

export class ContextProgress {
  /** Token evaluations (`next()` on a sequence's token iterator) not yet returned. */
  private evaluating = 0;
  /** Prompt tokens of the evaluations that are a request's first token (its prompt). */
  private promptTokens = 0;
  /** When a token evaluation last returned, or work was last handed to an idle context. */
  private last: number;

  /** The metered tokens last seen. */
  private metered: number;

  /**
   * `metered`: tokens the context has put into decode batches so far, all sequences
   * together (it grows when a batch starts).
   */
  constructor(
    private readonly bound: number,
    private readonly metered_: () => number = () => 0,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.last = now();
    this.metered = metered_();
  }

  /** A decode batch started since last looked: that is progress. */
  private observe(): void {
    const metered = this.metered_();
    if (metered !== this.metered) {
      this.metered = metered;
      this.last = this.now();
    }
  }

  /**
   * How long the context may go without any sequence's token returning: the bound, plus one
   * bound per PROMPT_TOKENS_PER_BOUND prompt tokens pending in the context (they are all
   * evaluated in the same batches, whichever request they belong to).
   */
  allowance(): number {
    return this.bound * (1 + Math.ceil(this.promptTokens / PROMPT_TOKENS_PER_BOUND));
  }

  /** Work is pending and no sequence has made progress for the allowance. */
  stalled(): boolean {
    this.observe();
    return this.evaluating > 0 && this.now() - this.last >= this.allowance();
  }

  /**
   * Tracks one token evaluation (`promptTokens` when it is the request's first, which
   * evaluates its prompt): its return, whenever that comes, is progress. The clock starts
   * now if the context had nothing to evaluate.
   */
  track<T>(evaluation: Promise<T>, promptTokens = 0): Promise<T> {
    this.observe();
    if (this.evaluating === 0) this.last = this.now();
    this.evaluating++;
    this.promptTokens += promptTokens;
    const done = () => {
      this.evaluating--;
      this.promptTokens -= promptTokens;
      this.last = this.now();
    };
    evaluation.then(done, done);
    return evaluation;
  }

  /**
   * Resolves 'stalled' once the context as a whole has made no progress for the allowance
   * (re-armed whenever some sequence made progress meanwhile); `cancel` stops watching. It
   * looks at the metered tokens at least every quarter bound, so a stall is declared at most
   * a quarter bound late.
   */
  watch(): { stalled: Promise<'stalled'>; cancel: () => void } {
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<'stalled'>((resolve) => {
      const check = () => {
        if (this.stalled()) return resolve('stalled');
        const left = this.evaluating > 0 ? this.last + this.allowance() - this.now() : this.bound;
        timer = setTimeout(check, Math.max(1, Math.ceil(Math.min(left, this.bound / 4))));
      };
      check();
    });
    return { stalled, cancel: () => clearTimeout(timer) };
  }
}
