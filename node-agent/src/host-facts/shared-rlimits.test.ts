import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { containerUlimits, hardLimits, unlimitedForContainers, type SharedRlimit } from './shared-rlimits.js';

const limits = (sigpending: string, msgqueue: string, memlock: string) =>
  [
    'Limit                     Soft Limit           Hard Limit           Units     ',
    'Max locked memory         8388608              ' + memlock.padEnd(21) + 'bytes     ',
    'Max pending signals       96365                ' + sigpending.padEnd(21) + 'signals   ',
    'Max msgqueue size         819200               ' + msgqueue.padEnd(21) + 'bytes     ',
  ].join('\n');

describe('hardLimits', () => {
  it('reads the hard column of /proc/<pid>/limits', () => {
    expect(hardLimits(limits('96365', 'unlimited', '8388608'))).toEqual({ sigpending: 96365, msgqueue: 'unlimited', memlock: 8388608 });
    expect(hardLimits('')).toEqual({});
  });
});

describe('containerUlimits', () => {
  const all = new Set<SharedRlimit>(['sigpending', 'msgqueue', 'memlock']);
  it.each<[string, 'instance' | 'replica', Set<SharedRlimit>, Array<[string, number]>]>([
    ['every container unlimited where the host allows it', 'instance', all, [['sigpending', -1], ['msgqueue', -1], ['memlock', -1]]],
    ['a model server too', 'replica', all, [['sigpending', -1], ['msgqueue', -1], ['memlock', -1]]],
    ['an instance held far below the default where it does not; locked memory left alone', 'instance', new Set(), [['sigpending', 1024], ['msgqueue', 81920]]],
    ["a model server keeps the host's default, above any instance's reach", 'replica', new Set(), []],
    ['one allowed, the others bounded', 'instance', new Set(['memlock']), [['sigpending', 1024], ['msgqueue', 81920], ['memlock', -1]]],
  ])('%s', (_name, kind, unlimited, expected) => {
    expect(containerUlimits(kind, unlimited).map((u) => [u.Name, u.Hard])).toEqual(expected);
    for (const u of containerUlimits(kind, unlimited)) expect(u.Soft).toBe(u.Hard);
  });
});

describe('unlimitedForContainers', () => {
  it('is what every containerd has unlimited, and nothing when none runs', async () => {
    const proc = mkdtempSync(join(tmpdir(), 'proc-'));
    try {
      const add = (pid: number, comm: string, text: string) => {
        mkdirSync(join(proc, String(pid)));
        writeFileSync(join(proc, String(pid), 'comm'), `${comm}\n`);
        writeFileSync(join(proc, String(pid), 'limits'), text);
      };
      expect(await unlimitedForContainers(proc)).toEqual(new Set());
      add(10, 'containerd', limits('unlimited', 'unlimited', '8388608'));
      add(11, 'dockerd', limits('96365', '819200', '8388608'));
      expect(await unlimitedForContainers(proc)).toEqual(new Set(['sigpending', 'msgqueue']));
      add(12, 'containerd', limits('unlimited', '819200', 'unlimited'));
      expect(await unlimitedForContainers(proc)).toEqual(new Set(['sigpending']));
    } finally {
      rmSync(proc, { recursive: true, force: true });
    }
  });
});
