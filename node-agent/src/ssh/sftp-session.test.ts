import { describe, expect, it } from 'vitest';
import { attrsOf, longName } from './sftp-session.js';

describe('SFTP answers', () => {
  it('turns a stat into SFTP attributes', () => {
    expect(attrsOf({ name: 'a', mode: 0o100644, size: 12, mtime: 1_700_000_000, uid: 1000, gid: 100 })).toEqual({ mode: 0o100644, uid: 1000, gid: 100, size: 12, atime: 1_700_000_000, mtime: 1_700_000_000 });
    expect(attrsOf({ name: 'a', mode: 0o40755, size: 0, mtime: 0 })).toMatchObject({ uid: 0, gid: 0 });
  });

  it('writes ls -l lines as OpenSSH\'s sftp-server does', () => {
    const old = Date.UTC(2020, 0, 2, 3, 4) / 1000;
    expect(longName({ name: 'notes.txt', mode: 0o100640, size: 1234, mtime: old, uid: 0, gid: 0 })).toBe('-rw-r-----    1 0        0            1234 Jan  2  2020 notes.txt');
    expect(longName({ name: 'sh', mode: 0o120777, size: 7, mtime: old, linkTarget: '/bin/busybox' })).toMatch(/^lrwxrwxrwx .* sh -> \/bin\/busybox$/);
    const recent = Math.floor(Date.now() / 1000);
    expect(longName({ name: 'd', mode: 0o40755, size: 0, mtime: recent })).toMatch(/^drwxr-xr-x .* \d\d:\d\d d$/);
    // Every month as `ls` writes it.
    const months = Array.from({ length: 12 }, (_, m) => longName({ name: 'f', mode: 0o100644, size: 0, mtime: Date.UTC(2020, m, 15) / 1000 }).split(/\s+/)[5]);
    expect(months).toEqual(['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']);
  });
});
