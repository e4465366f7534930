// Counts held per key (connections per source, per instance): a key whose count falls to
// zero is dropped, so the map holds only keys with something open.
export class Tally {
  private readonly counts = new Map<string, number>();

  /** Keys with something open. */
  get size(): number {
    return this.counts.size;
  }

  of(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  add(key: string): void {
    this.counts.set(key, this.of(key) + 1);
  }

  remove(key: string): void {
    const left = this.of(key) - 1;
    if (left <= 0) this.counts.delete(key);
    else this.counts.set(key, left);
  }
}
