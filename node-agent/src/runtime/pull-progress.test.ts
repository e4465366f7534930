import { describe, expect, it } from 'vitest';
import { PullProgressTracker, pullEventError, StagedPullProgress, type PullEvent } from './pull-progress.js';
import type { PullProgress } from './runtime.js';

const layer = (id: string, status: string, current?: number, total?: number): PullEvent => ({
  id,
  status,
  progressDetail: current === undefined ? {} : { current, total },
});

describe('PullProgressTracker', () => {
  it('weighs download and extraction half each, by layer size, ignoring layers already present', () => {
    const t = new PullProgressTracker('img:1');
    expect(t.update({ status: 'Pulling from svc/x', id: '1' }).fraction).toBe(0);
    t.update(layer('base', 'Already exists'));
    t.update(layer('big', 'Pulling fs layer'));
    t.update(layer('small', 'Pulling fs layer'));
    // big: 300 of 600 downloaded; small's size unknown, so it weighs the mean known size (600).
    expect(t.update(layer('big', 'Downloading', 300, 600)).fraction).toBeCloseTo((600 * 0.25) / 1200);
    // small's size appears: 1200, so the true value drops to 150/1800; the report stays.
    expect(t.update(layer('small', 'Downloading', 0, 1200)).fraction).toBeCloseTo(0.125);
    t.update(layer('big', 'Download complete'));
    // big downloaded (half its weight: 300), small 0: 300/1800.
    expect(t.update(layer('big', 'Extracting', 0, 600)).fraction).toBeCloseTo(300 / 1800);
    t.update(layer('small', 'Downloading', 1200, 1200));
    expect(t.update(layer('big', 'Pull complete')).fraction).toBeCloseTo((600 + 600) / 1800);
    // Everything done but the stream has not ended: not yet 1.
    const almost = t.update(layer('small', 'Pull complete'));
    expect(almost.fraction).toBe(0.99);
    expect(almost.status).toBe('Pull complete small');
    expect(t.complete('Status: Downloaded newer image for img:1')).toEqual({
      image: 'img:1',
      fraction: 1,
      status: 'Status: Downloaded newer image for img:1',
    });
  });

  it('adds up the compressed size of the layers to fetch as the registry tells them, not those present', () => {
    const t = new PullProgressTracker('img:1');
    t.update(layer('base', 'Already exists'));
    t.update(layer('big', 'Pulling fs layer'));
    expect(t.layerBytes()).toBe(0);
    t.update(layer('big', 'Downloading', 100, 600));
    t.update(layer('small', 'Downloading', 0, 1200));
    t.update(layer('big', 'Downloading', 500, 600));
    expect(t.layerBytes()).toBe(1800);
  });

  it('never goes backwards, even when a layer download is retried', () => {
    const t = new PullProgressTracker('img:1');
    t.update(layer('a', 'Downloading', 50, 100));
    const before = t.update(layer('a', 'Downloading', 80, 100)).fraction;
    const after = t.update(layer('a', 'Retrying in 5 seconds')).fraction;
    expect(after).toBe(before);
    expect(t.update(layer('a', 'Downloading', 10, 100)).fraction).toBe(before);
  });

  it('counts the bytes moved, downloaded and unpacked, for the stall deadline; a retried layer does not count twice', () => {
    const t = new PullProgressTracker('img:1');
    t.update(layer('a', 'Downloading', 0, 1000));
    expect(t.movedBytes()).toBe(0);
    t.update(layer('a', 'Downloading', 400, 1000));
    t.update(layer('b', 'Downloading', 100, 200));
    expect(t.movedBytes()).toBe(500);
    t.update(layer('a', 'Retrying in 5 seconds'));
    t.update(layer('a', 'Downloading', 100, 1000));
    expect(t.movedBytes()).toBe(500);
    t.update(layer('a', 'Extracting', 500, 1000));
    expect(t.movedBytes()).toBe(1000 + 500 + 100);
    t.update(layer('a', 'Pull complete'));
    expect(t.movedBytes()).toBe(2000 + 100);
  });

  it('finds errors reported inside the stream', () => {
    expect(pullEventError({ error: 'manifest unknown', errorDetail: { message: 'manifest unknown' } })).toBe('manifest unknown');
    expect(pullEventError({ errorDetail: { message: 'EOF' } })).toBe('EOF');
    expect(pullEventError({ status: 'Downloading' })).toBeNull();
  });
});

describe('StagedPullProgress', () => {
  const run = (staged: boolean, steps: Array<['staging', number, number] | ['pulling', number]>) => {
    const seen: PullProgress[] = [];
    const progress = new StagedPullProgress('img', (p) => seen.push(p), staged);
    for (const step of steps) {
      if (step[0] === 'staging') progress.staging({ bytes: step[1], total: step[2], status: 'Downloading' });
      else progress.pulling({ image: 'front/ref', fraction: step[1], status: 'Extracting' });
    }
    return seen.map((p) => p.fraction);
  };

  it.each([
    { name: 'staging fills the first half, by bytes', staged: true, steps: [['staging', 0, 100], ['staging', 50, 100], ['staging', 100, 100]], want: [0, 0.25, 0.5] },
    { name: "dockerd's pull from the front fills the second", staged: true, steps: [['staging', 100, 100], ['pulling', 0], ['pulling', 0.5], ['pulling', 1]], want: [0.5, 0.5, 0.75, 1] },
    { name: 'never goes back (a retried pull starts at 0 again)', staged: true, steps: [['staging', 100, 100], ['pulling', 0.8], ['pulling', 0], ['staging', 10, 10]], want: [0.5, 0.9, 0.9, 0.9] },
    { name: "nothing staged: dockerd's own fraction", staged: false, steps: [['pulling', 0.3], ['pulling', 0.99], ['pulling', 1]], want: [0.3, 0.99, 1] },
    { name: 'below 1 until dockerd is done', staged: true, steps: [['pulling', 0.999]], want: [0.99] },
  ] as Array<{ name: string; staged: boolean; steps: Array<['staging', number, number] | ['pulling', number]>; want: number[] }>)('$name', ({ staged, steps, want }) => {
    expect(run(staged, steps)).toEqual(want);
  });

  it("names the tenant's image, not the front's", () => {
    const seen: PullProgress[] = [];
    new StagedPullProgress('registry.example/tenant/app:1', (p) => seen.push(p), true).pulling({ image: '127.0.0.1:1/pull/x@sha256:0', fraction: 0.2, status: 'Extracting' });
    expect(seen).toEqual([{ image: 'registry.example/tenant/app:1', fraction: 0.6, status: 'Extracting' }]);
  });
});
