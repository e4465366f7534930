// The host's open-file table, fs.file-max, is one count for the whole host, and only
// processes without CAP_SYS_ADMIN are held to it: every tenant, never the agent or Docker.
// The kernel's default is about one file per 10 KiB of memory (2.4 million on a 24 GiB
// host), while what a tenant's open files take in the kernel is charged to its own memory
// limit, at about 400 bytes each: an instance of a few GiB can hold the whole table, and
// then every other tenant's open() and socket() fail with ENFILE. systemd (240 and later)
// raises the table to its maximum at boot, leaving each tenant's memory limit as the bound;
// the agent does the same on a host that booted without it.
import { readFile, writeFile } from 'node:fs/promises';

/** The largest value the kernel takes (LONG_MAX), as systemd writes it. */
export const FILE_MAX = '9223372036854775807';

export type FileTableOutcome = { changed: false; value: string } | { changed: true; from: string } | { changed: false; error: string };

/** Raises fs.file-max to FILE_MAX when it is lower; says what it found and did. */
export async function raiseFileTable(path = '/proc/sys/fs/file-max'): Promise<FileTableOutcome> {
  let value: string;
  try {
    value = (await readFile(path, 'utf8')).trim();
  } catch (err) {
    return { changed: false, error: (err as Error).message };
  }
  if (BigInt(value) >= BigInt(FILE_MAX)) return { changed: false, value };
  try {
    await writeFile(path, FILE_MAX);
  } catch (err) {
    return { changed: false, error: `${path} is ${value} and cannot be raised: ${(err as Error).message}` };
  }
  return { changed: true, from: value };
}
