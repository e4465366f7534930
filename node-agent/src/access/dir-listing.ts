// What the agent's lister (`/.svc/log-init --list-dir DIR`, node-agent/log-init/log_init.c)
// prints, read back: one record per entry, `MODE SIZE MTIME UID GID NAME\0TARGET\0`, mode
// in octal, SIZE of regular files (else 0), TARGET a symlink's (else empty). Names may hold
// any byte but NUL, spaces and newlines included, so they end at the NUL, not at a space.
import type { FileStat } from './container-fs.js';

const HEAD = /^([0-7]+) (\d+) (-?\d+) (\d+) (\d+) /;

/** The entries of a listing; throws on output that is not one (a truncated or foreign answer). */
export function parseDirListing(output: string): FileStat[] {
  const fields = output.split('\0');
  // A whole listing ends with a NUL, so the last field is empty; each record is two fields.
  if (fields.pop() !== '' || fields.length % 2 !== 0) throw new Error('the directory listing is cut off');
  const entries: FileStat[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    const record = fields[i]!;
    const head = HEAD.exec(record);
    const name = head ? record.slice(head[0].length) : '';
    if (!head || name === '') throw new Error(`not a directory listing record: ${JSON.stringify(record.slice(0, 80))}`);
    const target = fields[i + 1]!;
    entries.push({
      name,
      mode: parseInt(head[1]!, 8),
      size: Number(head[2]),
      mtime: Number(head[3]),
      uid: Number(head[4]),
      gid: Number(head[5]),
      ...(target ? { linkTarget: target } : {}),
    });
  }
  return entries;
}
