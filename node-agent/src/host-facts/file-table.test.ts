// raiseFileTable on a file standing in for /proc/sys/fs/file-max (to see each case without
// lowering this host's table under the suites running beside it), then on the real one:
// the tests run as root, as the agent does.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FILE_MAX, raiseFileTable } from './file-table.js';

const dir = mkdtempSync(join(tmpdir(), 'file-table-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('raiseFileTable', () => {
  it("raises a kernel default (one file per 10 KiB of memory) to the maximum, as systemd does", async () => {
    const file = join(dir, 'low');
    writeFileSync(file, '2466183\n');
    expect(await raiseFileTable(file)).toEqual({ changed: true, from: '2466183' });
    expect(readFileSync(file, 'utf8')).toBe(FILE_MAX);
  });

  it('leaves a table already at the maximum alone', async () => {
    const file = join(dir, 'max');
    writeFileSync(file, `${FILE_MAX}\n`);
    expect(await raiseFileTable(file)).toEqual({ changed: false, value: FILE_MAX });
  });

  it('says why when it cannot read the table', async () => {
    expect(await raiseFileTable(join(dir, 'missing'))).toMatchObject({ changed: false, error: expect.stringContaining('ENOENT') });
  });

  it("leaves this host's table at the maximum", async () => {
    expect(await raiseFileTable()).not.toHaveProperty('error');
    expect(readFileSync('/proc/sys/fs/file-max', 'utf8').trim()).toBe(FILE_MAX);
  });
});
