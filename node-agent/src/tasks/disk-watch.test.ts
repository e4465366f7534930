import { describe, expect, it } from 'vitest';
import { LABEL_DISK_LIMIT } from '../runtime/container-spec.js';
import { RuntimeError } from '../runtime/runtime.js';
import { formatBytes } from '../runtime/disk-usage.js';
import { DiskWatch, diskVerdict, limitOf } from './disk-watch.js';

const MIB = 1024 ** 2;
const GIB = 1024 ** 3;

describe('diskVerdict', () => {
  const limit = { bytes: 50 * GIB, files: 1_000_000 };
  it.each([
    ['well within', { bytes: 10 * GIB, files: 1000 }, null],
    ['exactly at both limits', { bytes: 50 * GIB, files: 1_000_000 }, null],
    ['one byte over', { bytes: 50 * GIB + 1, files: 1000 }, /used 50\.0 GiB of disk, over its limit of 50\.0 GiB/],
    ['one file over, in empty files', { bytes: 4096, files: 1_000_001 }, /held 1,000,001 files on disk, over its limit of 1,000,000/],
    ['over both: the bytes are named', { bytes: 60 * GIB, files: 2_000_000 }, /used 60\.0 GiB of disk/],
  ])('%s', (_name, used, expected) => {
    const verdict = diskVerdict(used, limit);
    if (expected === null) expect(verdict).toBeNull();
    else expect(verdict).toMatch(expected);
  });
});

describe('formatBytes', () => {
  it.each([
    [0, '0 bytes'],
    [1023, '1023 bytes'],
    [1536, '1.5 KiB'],
    [64 * MIB, '64.0 MiB'],
    [2.25 * 1024 * GIB, '2.3 TiB'],
  ])('%d', (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });
});

describe('limitOf', () => {
  it.each([
    ['the label the runtime wrote', { [LABEL_DISK_LIMIT]: String(80 * GIB) }, 80 * GIB],
    ['no label (a container from an older agent): the default', {}, 50 * GIB],
    ['an unreadable label: the default', { [LABEL_DISK_LIMIT]: 'lots' }, 50 * GIB],
    ['zero: the default', { [LABEL_DISK_LIMIT]: '0' }, 50 * GIB],
  ])('%s', (_name, labels, expected) => {
    expect(limitOf({ labels }, 50 * GIB)).toBe(expected);
  });
});

describe('DiskWatch', () => {
  const quietLog = { warn: () => undefined };
  const settings = { intervalMs: 60_000, defaultLimitBytes: GIB, maxFiles: 1_000_000 };
  const handle = (containerId: string, limit: number) => ({ containerId, labels: { [LABEL_DISK_LIMIT]: String(limit) } });

  it('hands over only the instance past its limit, once, and keeps measuring the others', async () => {
    const usage = new Map([
      ['c-small', 10 * MIB],
      ['c-big', 200 * MIB],
    ]);
    const over: Array<[string, string]> = [];
    const watch = new DiskWatch(async (id) => ({ bytes: usage.get(id)!, files: 10 }), (task, message) => over.push([task, message]), quietLog, settings);
    watch.watch('inst_small', handle('c-small', 64 * MIB));
    watch.watch('inst_big', handle('c-big', 64 * MIB));
    await watch.checkAll();
    await watch.checkAll();
    expect(over).toEqual([['inst_big', expect.stringContaining('over its limit of 64.0 MiB')]]);
    usage.set('c-small', 65 * MIB);
    await watch.checkAll();
    expect(over.map(([task]) => task)).toEqual(['inst_big', 'inst_small']);
    watch.stop();
  });

  it('forgets a container that is gone, and goes on past one it cannot measure', async () => {
    const measured: string[] = [];
    const watch = new DiskWatch(
      async (id) => {
        measured.push(id);
        if (id === 'c-gone') throw new RuntimeError('not_found', 'no such container', false);
        if (id === 'c-flaky') throw new RuntimeError('engine_error', 'engine busy', true);
        return { bytes: 0, files: 0 };
      },
      () => undefined,
      quietLog,
      settings,
    );
    for (const id of ['gone', 'flaky', 'fine']) watch.watch(`inst_${id}`, handle(`c-${id}`, GIB));
    await watch.checkAll();
    await watch.checkAll();
    expect(measured).toEqual(['c-gone', 'c-flaky', 'c-fine', 'c-flaky', 'c-fine']);
    watch.stop();
  });

  it('goes on past a container whose measuring does not end (its engine lock held), judges it when it ends, and does not measure it twice meanwhile', async () => {
    const measured: string[] = [];
    let unlock!: () => void;
    const locked = new Promise<void>((resolve) => (unlock = resolve));
    const over: string[] = [];
    const watch = new DiskWatch(
      async (id) => {
        measured.push(id);
        if (id === 'c-locked') await locked;
        return { bytes: id === 'c-locked' ? 2 * GIB : 0, files: 0 };
      },
      (task) => over.push(task),
      quietLog,
      { ...settings, measureWaitMs: 20 },
    );
    for (const id of ['locked', 'other']) watch.watch(`inst_${id}`, handle(`c-${id}`, GIB));
    await watch.checkAll();
    await watch.checkAll();
    expect(measured).toEqual(['c-locked', 'c-other', 'c-other']);
    expect(over).toEqual([]);
    unlock();
    await new Promise((r) => setTimeout(r, 0));
    expect(over).toEqual(['inst_locked']);
    watch.stop();
  });

  it('measures a container whose measuring is costly only after ten times what it took, the others every pass', async () => {
    let clock = 0;
    const cost = new Map([
      ['c-light', 20],
      ['c-heavy', 5_000],
    ]);
    const measured: string[] = [];
    const watch = new DiskWatch(
      async (id) => {
        measured.push(id);
        clock += cost.get(id)!; // what walking its files took
        return { bytes: 0, files: 0 };
      },
      () => undefined,
      quietLog,
      { ...settings, intervalMs: 10_000 },
      () => clock,
    );
    watch.watch('inst_light', handle('c-light', GIB));
    watch.watch('inst_heavy', handle('c-heavy', GIB));
    // Ten passes, one every interval: 100 s. The heavy one is due again 50 s after each measuring.
    for (let pass = 0; pass < 10; pass++) {
      await watch.checkAll();
      clock += 10_000;
    }
    expect(measured.filter((id) => id === 'c-light')).toHaveLength(10);
    expect(measured.filter((id) => id === 'c-heavy')).toHaveLength(2);
    watch.stop();
  });

  it('measures again every interval on its own', async () => {
    let passes = 0;
    const watch = new DiskWatch(async () => (passes++, { bytes: 0, files: 0 }), () => undefined, quietLog, { ...settings, intervalMs: 20 });
    watch.watch('inst_1', handle('c-1', GIB));
    await new Promise((r) => setTimeout(r, 200));
    watch.stop();
    expect(passes).toBeGreaterThanOrEqual(3);
  });
});
