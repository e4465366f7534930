// Stop sequences over streamed text (OpenAI semantics): output ends right
// before the first stop sequence, which is never emitted, even when it arrives
// split across several tokens. Text that might begin a stop sequence is held
// back until the next piece shows whether it does.

export interface StopResult {
  /** Text that is now safe to emit. */
  text: string;
  /** A stop sequence was found; nothing after it may be emitted. */
  stopped: boolean;
}

export class StopMatcher {
  private held = '';
  private done = false;
  private readonly stops: string[];

  constructor(stops: readonly string[]) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  push(piece: string): StopResult {
    if (this.done) return { text: '', stopped: true };
    const text = this.held + piece;
    // The earliest stop sequence in the text wins.
    let cut = -1;
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) {
      this.done = true;
      this.held = '';
      return { text: text.slice(0, cut), stopped: true };
    }
    const keep = this.partialSuffixLength(text);
    this.held = text.slice(text.length - keep);
    return { text: text.slice(0, text.length - keep), stopped: false };
  }

  /** Generation ended without a stop sequence: what was held back is output after all. */
  flush(): string {
    const text = this.done ? '' : this.held;
    this.held = '';
    return text;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop sequence. */
  private partialSuffixLength(text: string): number {
    let longest = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > longest; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          longest = n;
          break;
        }
      }
    }
    return longest;
  }
}
