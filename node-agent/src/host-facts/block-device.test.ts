import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deviceNumberOf, diskUnder, wholeDiskOf } from './block-device.js';

const sys = mkdtempSync(join(tmpdir(), 'sysfs-'));
afterAll(() => rmSync(sys, { recursive: true, force: true }));

/** A sysfs tree as the kernel lays it out: disks, a partition in its disk's directory, links by number. */
function device(relative: string, numbers: string, partition = false): void {
  const dir = join(sys, 'devices', relative);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'dev'), `${numbers}\n`);
  if (partition) writeFileSync(join(dir, 'partition'), '1\n');
  mkdirSync(join(sys, 'dev', 'block'), { recursive: true });
  symlinkSync(join('..', '..', 'devices', relative), join(sys, 'dev', 'block', numbers));
}

device('pci0000:00/nvme/nvme0/block/nvme0n1', '259:0');
device('pci0000:00/nvme/nvme0/block/nvme0n1/nvme0n1p2', '259:2', true);
device('virtual/block/dm-1', '253:1');

describe('wholeDiskOf', () => {
  it.each([
    ['a whole disk', { major: 259, minor: 0 }, { path: '/dev/nvme0n1', major: 259, minor: 0 }],
    ['a partition: its disk', { major: 259, minor: 2 }, { path: '/dev/nvme0n1', major: 259, minor: 0 }],
    ['a device-mapper volume', { major: 253, minor: 1 }, { path: '/dev/dm-1', major: 253, minor: 1 }],
    ['an anonymous device (btrfs, overlay, tmpfs)', { major: 0, minor: 45 }, undefined],
  ])('%s', async (_what, numbers, expected) => {
    expect(await wholeDiskOf(numbers, sys)).toEqual(expected);
  });
});

describe('on this host', () => {
  it('finds the disk under / as lsblk does', async () => {
    const disk = await diskUnder('/');
    expect(disk).toBeDefined();
    expect(statSync(disk!.path).isBlockDevice()).toBe(true);
    // The root's device, by the kernel's numbers, is the disk itself or one of its partitions.
    const root = await deviceNumberOf('/');
    const [major, minor] = execFileSync('stat', ['-c', '%Hd %Ld', '/'], { encoding: 'utf8' }).trim().split(' ').map(Number);
    expect(root).toEqual({ major, minor });
    const names = execFileSync('lsblk', ['-nro', 'NAME,MAJ:MIN,TYPE'], { encoding: 'utf8' }).trim().split('\n').map((line) => line.split(' '));
    const listed = names.find(([, numbers]) => numbers === `${disk!.major}:${disk!.minor}`);
    expect(listed?.[0] && `/dev/${listed[0]}`).toBe(disk!.path);
  });

  it('says nothing for a file system on no block device', async () => {
    expect(await diskUnder('/proc')).toBeUndefined();
  });
});
