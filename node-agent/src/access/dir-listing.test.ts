import { describe, expect, it } from 'vitest';
import { parseDirListing } from './dir-listing.js';

describe('parseDirListing', () => {
  it('reads each record, with names holding spaces and newlines, and symlink targets', () => {
    const output = ['100644 3 1795798529 0 0 a file\0\0', '40755 0 1795798529 1000 100 sub\0\0', '120777 0 17 0 0 link x\0/etc/passwd\0', '100600 9 17 0 0 we\nird\0\0'].join('');
    expect(parseDirListing(output)).toEqual([
      { name: 'a file', mode: 0o100644, size: 3, mtime: 1795798529, uid: 0, gid: 0 },
      { name: 'sub', mode: 0o40755, size: 0, mtime: 1795798529, uid: 1000, gid: 100 },
      { name: 'link x', mode: 0o120777, size: 0, mtime: 17, uid: 0, gid: 0, linkTarget: '/etc/passwd' },
      { name: 'we\nird', mode: 0o100600, size: 9, mtime: 17, uid: 0, gid: 0 },
    ]);
  });

  it('an empty directory is an empty listing', () => {
    expect(parseDirListing('')).toEqual([]);
  });

  it.each([
    ['cut off inside a record', '100644 3 17 0 0 a'],
    ['cut off before the target', '100644 3 17 0 0 a\0'],
    ['a record that is not one', 'OCI runtime exec failed\0\0'],
    ['a record with no name', '100644 3 17 0 0 \0\0'],
  ])('refuses output %s', (_what, output) => {
    expect(() => parseDirListing(output)).toThrow();
  });
});
