import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ContextProgress } from './progress.js';

/** A token evaluation the test returns when it likes. */
function evaluation() {
  let done!: () => void;
  const promise = new Promise<void>((resolve) => { done = resolve; });
  return { promise, done };
}

describe('ContextProgress', () => {
  beforeEach(() => { vi.useFakeTimers(); });
  afterEach(() => { vi.useRealTimers(); });
  let metered = 0;
  const progress = () => new ContextProgress(100, () => metered, () => Date.now());

  it('is stalled only when no evaluation of the context returned for the bound while one is pending', async () => {
    const p = progress();
    await vi.advanceTimersByTimeAsync(1_000); // idle: nothing pending, nothing stalled
    expect(p.stalled()).toBe(false);
    const a = evaluation();
    const b = evaluation();
    p.track(a.promise);
    p.track(b.promise);
    await vi.advanceTimersByTimeAsync(90);
    a.done(); // a's token is progress for b too
    await vi.advanceTimersByTimeAsync(90);
    expect(p.stalled()).toBe(false);
    await vi.advanceTimersByTimeAsync(10);
    expect(p.stalled()).toBe(true);
    b.done();
    await vi.advanceTimersByTimeAsync(0);
    expect(p.stalled()).toBe(false);
  });

  it('allows one more bound per 512 prompt tokens pending in the whole context, until those prompts are evaluated', async () => {
    const p = progress();
    const prompts = [evaluation(), evaluation(), evaluation(), evaluation()];
    for (const e of prompts) p.track(e.promise, 1_901);
    expect(p.allowance()).toBe(100 * (1 + 15));
    await vi.advanceTimersByTimeAsync(1_500);
    expect(p.stalled()).toBe(false);
    for (const e of prompts) e.done();
    await vi.advanceTimersByTimeAsync(0);
    expect(p.allowance()).toBe(100);
  });

  it('counts a decode batch starting (tokens metered) as progress', async () => {
    const p = progress();
    const a = evaluation();
    p.track(a.promise, 100);
    await vi.advanceTimersByTimeAsync(150);
    metered += 512;
    expect(p.stalled()).toBe(false);
    await vi.advanceTimersByTimeAsync(199);
    expect(p.stalled()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(p.stalled()).toBe(true);
    a.done();
  });

  it('watch resolves once the context made no progress for the allowance, re-arming when it did', async () => {
    const p = progress();
    const a = evaluation();
    const b = evaluation();
    p.track(a.promise);
    p.track(b.promise);
    const watch = p.watch();
    let stalledAt: number | undefined;
    const t0 = Date.now();
    void watch.stalled.then(() => { stalledAt = Date.now() - t0; });
    await vi.advanceTimersByTimeAsync(60);
    a.done();
    await vi.advanceTimersByTimeAsync(100);
    expect(stalledAt).toBe(160);
    watch.cancel();
  });
});
