import { describe, expect, it } from 'vitest';
import { modeString, posixModeFromGo, posixModeFromTar } from './file-modes.js';

describe('file modes', () => {
  it('turns Docker path-stat (Go FileMode) modes into POSIX ones', () => {
    expect(posixModeFromGo(134218239).toString(8)).toBe('120777'); // symlink, as Docker reported for /bin/sh
    expect(posixModeFromGo(416).toString(8)).toBe('100640'); // a plain 0640 file
    expect(posixModeFromGo(2 ** 31 + 0o755).toString(8)).toBe('40755');
    expect(posixModeFromGo(2 ** 31 + 2 ** 20 + 0o777).toString(8)).toBe('41777'); // /tmp
    expect(posixModeFromGo(2 ** 26 + 2 ** 21 + 0o666).toString(8)).toBe('20666'); // /dev/null
  });

  it('turns tar entries into POSIX modes', () => {
    expect(posixModeFromTar('directory', 0o700).toString(8)).toBe('40700');
    expect(posixModeFromTar('symlink', 0o777).toString(8)).toBe('120777');
    expect(posixModeFromTar('file', 0o4755).toString(8)).toBe('104755');
  });

  it('prints modes like ls -l', () => {
    expect(modeString(0o40755)).toBe('drwxr-xr-x');
    expect(modeString(0o100640)).toBe('-rw-r-----');
    expect(modeString(0o41777)).toBe('drwxrwxrwt');
    expect(modeString(0o104755)).toBe('-rwsr-xr-x');
    expect(modeString(0o120777)).toBe('lrwxrwxrwx');
  });
});
