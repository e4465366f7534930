// raiseKernelTables on files standing in for /proc/sys (to see each case without lowering
// this host's tables under the suites running beside it), then on the real ones: the
// tests run as root, as the agent does.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KERNEL_TABLES, raiseKernelTables } from './kernel-tables.js';

const dir = mkdtempSync(join(tmpdir(), 'kernel-tables-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const standIn = (name: string, value: string) => {
  const path = join(dir, name);
  writeFileSync(path, `${value}\n`);
  return { name, path, target: 4194304n };
};

describe('raiseKernelTables', () => {
  it('raises a table below its target, leaves one at or above it alone, and says why when one cannot be read', async () => {
    const low = standIn('low', '32768');
    const high = standIn('high', '9223372036854775807');
    expect(await raiseKernelTables([low, high, { name: 'missing', path: join(dir, 'missing'), target: 1n }])).toEqual([
      { name: 'low', changed: true, from: '32768', to: '4194304' },
      { name: 'high', changed: false, value: '9223372036854775807' },
      { name: 'missing', changed: false, error: expect.stringContaining('ENOENT') },
    ]);
    expect(readFileSync(low.path, 'utf8')).toBe('4194304');
    expect(readFileSync(high.path, 'utf8')).toBe('9223372036854775807\n');
  });

  it("leaves this host's open-file table and PID space at least where systemd puts them", async () => {
    for (const outcome of await raiseKernelTables()) expect(outcome).not.toHaveProperty('error');
    for (const table of KERNEL_TABLES) expect({ [table.name]: BigInt(readFileSync(table.path, 'utf8').trim()) >= table.target }).toEqual({ [table.name]: true });
  });
});
