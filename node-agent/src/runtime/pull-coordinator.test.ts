import { describe, expect, it } from 'vitest';
import { PullCoordinator, type PullImage } from './pull-coordinator.js';
import type { ProgressListener, PullProgress } from './runtime.js';

/** A pull the test finishes by hand, so overlap is certain rather than timing-dependent. */
function manualPulls() {
  const pending = new Map<string, { report: ProgressListener; resolve: () => void; reject: (e: Error) => void; signal: AbortSignal }>();
  const calls: string[] = [];
  const pullImage: PullImage = (image, report, signal) =>
    new Promise<void>((resolve, reject) => {
      calls.push(image);
      pending.set(image, { report, resolve, reject, signal });
    });
  const get = (image: string) => {
    const p = pending.get(image);
    if (!p) throw new Error(`no pull of ${image} in flight`);
    return p;
  };
  return { calls, pullImage, get };
}

const progress = (image: string, fraction: number): PullProgress => ({ image, fraction, status: `at ${fraction}` });
const tick = () => new Promise((r) => setImmediate(r));

describe('PullCoordinator', () => {
  it('runs one pull for concurrent callers of one image and gives every caller the progress and result', async () => {
    const pulls = manualPulls();
    const coordinator = new PullCoordinator(pulls.pullImage);
    const seenA: number[] = [];
    const seenB: number[] = [];
    const a = coordinator.pull('img:1', (p) => seenA.push(p.fraction));
    await tick();
    pulls.get('img:1').report(progress('img:1', 0.25));
    const b = coordinator.pull('img:1', (p) => seenB.push(p.fraction)); // late joiner
    pulls.get('img:1').report(progress('img:1', 0.5));
    pulls.get('img:1').report(progress('img:1', 1));
    pulls.get('img:1').resolve();
    await Promise.all([a, b]);

    expect(pulls.calls).toEqual(['img:1']);
    expect(coordinator.pullsStarted).toBe(1);
    expect(seenA).toEqual([0.25, 0.5, 1]);
    expect(seenB).toEqual([0.25, 0.5, 1]); // got the latest event on joining
    expect(coordinator.inFlightImages).toEqual([]);
  });

  it('pulls different images separately', async () => {
    const pulls = manualPulls();
    const coordinator = new PullCoordinator(pulls.pullImage);
    const a = coordinator.pull('a:1');
    const b = coordinator.pull('b:1');
    await tick();
    expect(pulls.calls).toEqual(['a:1', 'b:1']);
    pulls.get('a:1').resolve();
    pulls.get('b:1').resolve();
    await Promise.all([a, b]);
  });

  it('gives every caller the shared failure, and a later call pulls again', async () => {
    const pulls = manualPulls();
    const coordinator = new PullCoordinator(pulls.pullImage);
    const a = coordinator.pull('img:1');
    const b = coordinator.pull('img:1', () => {});
    await tick();
    pulls.get('img:1').reject(new Error('registry down'));
    await expect(a).rejects.toThrow('registry down');
    await expect(b).rejects.toThrow('registry down');

    const c = coordinator.pull('img:1');
    await tick();
    expect(pulls.calls).toEqual(['img:1', 'img:1']);
    pulls.get('img:1').resolve();
    await c;
  });

  it('a caller whose listener throws gets that error; the others keep the pull', async () => {
    const pulls = manualPulls();
    const coordinator = new PullCoordinator(pulls.pullImage);
    const seen: number[] = [];
    const broken = coordinator.pull('img:1', () => {
      throw new Error('listener bug');
    });
    const healthy = coordinator.pull('img:1', (p) => seen.push(p.fraction));
    await tick();
    pulls.get('img:1').report(progress('img:1', 0.5));
    pulls.get('img:1').report(progress('img:1', 1));
    pulls.get('img:1').resolve();
    await expect(broken).rejects.toThrow('listener bug');
    await healthy;
    expect(seen).toEqual([0.5, 1]);
  });

  it('a pull function that throws synchronously still rejects the callers', async () => {
    const coordinator = new PullCoordinator(() => {
      throw new Error('boom');
    });
    await expect(coordinator.pull('img:1')).rejects.toThrow('boom');
    expect(coordinator.inFlightImages).toEqual([]);
  });

  it('a caller that gives up leaves a shared pull to the others; the pull is stopped once nobody waits for it', async () => {
    const pulls = manualPulls();
    const coordinator = new PullCoordinator(pulls.pullImage);
    const first = new AbortController();
    const second = new AbortController();
    const seenSecond: number[] = [];
    const a = coordinator.pull('img:1', () => {}, first.signal);
    const b = coordinator.pull('img:1', (p) => seenSecond.push(p.fraction), second.signal);
    await tick();
    const pull = pulls.get('img:1');
    first.abort(new Error('instance stopped'));
    await expect(a).rejects.toThrow('instance stopped');
    // The other start still waits: its pull goes on and it hears of it.
    expect(pull.signal.aborted).toBe(false);
    pull.report(progress('img:1', 0.5));
    expect(seenSecond).toEqual([0.5]);
    second.abort(new Error('instance stopped too'));
    await expect(b).rejects.toThrow('instance stopped too');
    expect(pull.signal.aborted).toBe(true);
    expect(coordinator.inFlightImages).toEqual([]);
    // A later start pulls anew rather than join the stopped pull.
    const c = coordinator.pull('img:1');
    await tick();
    expect(pulls.calls).toEqual(['img:1', 'img:1']);
    pulls.get('img:1').resolve();
    await c;
  });

  it('a caller that gives up before the pull it joins finishes does not stop it for one that waits without a signal', async () => {
    const pulls = manualPulls();
    const coordinator = new PullCoordinator(pulls.pullImage);
    const gives = new AbortController();
    const a = coordinator.pull('img:1', undefined, gives.signal);
    const b = coordinator.pull('img:1');
    await tick();
    gives.abort(new Error('gone'));
    await expect(a).rejects.toThrow('gone');
    expect(pulls.get('img:1').signal.aborted).toBe(false);
    pulls.get('img:1').resolve();
    await b;
    // One already given up starts nothing.
    await expect(coordinator.pull('img:2', undefined, gives.signal)).rejects.toThrow('gone');
    expect(pulls.calls).toEqual(['img:1']);
  });
});
