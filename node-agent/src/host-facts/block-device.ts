// The disk under a path, for Docker's per-container disk bandwidth limits: Docker (and the
// kernel's throttle) take a whole block device, named by a path under /dev, and Docker's
// data root usually sits on a partition or a device-mapper volume of it. Read from sysfs:
// /sys/dev/block/<major>:<minor> links to the device, and a partition's directory sits in
// its disk's.
import { access, readFile, realpath, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export interface BlockDevice {
  /** Where Docker finds it: /dev/<kernel name>. */
  path: string;
  major: number;
  minor: number;
}

/** The device number (st_dev) of the file system holding `path`, split as the kernel does. */
export async function deviceNumberOf(path: string): Promise<{ major: number; minor: number }> {
  const { dev } = await stat(path, { bigint: true });
  // glibc's gnu_dev_major/gnu_dev_minor: 12 bits of major, 20 of minor, spread over 64.
  const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
  const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn));
  return { major, minor };
}

/**
 * The whole disk that device `major:minor` is or is a partition of; undefined when it is
 * no block device (btrfs subvolumes, ZFS, tmpfs and overlay report anonymous numbers).
 */
export async function wholeDiskOf(device: { major: number; minor: number }, sysRoot = '/sys'): Promise<BlockDevice | undefined> {
  let dir: string;
  try {
    dir = await realpath(join(sysRoot, 'dev', 'block', `${device.major}:${device.minor}`));
  } catch {
    return undefined;
  }
  const isPartition = await access(join(dir, 'partition')).then(
    () => true,
    () => false,
  );
  const disk = isPartition ? dirname(dir) : dir;
  const numbers = /^(\d+):(\d+)$/.exec((await readFile(join(disk, 'dev'), 'utf8')).trim());
  if (!numbers) return undefined;
  return { path: `/dev/${basename(disk)}`, major: Number(numbers[1]), minor: Number(numbers[2]) };
}

/** The disk under `path`, or undefined when it is on no block device. */
export async function diskUnder(path: string, sysRoot = '/sys'): Promise<BlockDevice | undefined> {
  return wholeDiskOf(await deviceNumberOf(path), sysRoot);
}
