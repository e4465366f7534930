import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cgroupVersion } from './cgroup-version.js';

const dir = mkdtempSync(join(tmpdir(), 'cgroup-version-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('cgroupVersion', () => {
  it('tells the unified hierarchy (cgroup.controllers at its root) from v1 (one directory per controller)', async () => {
    mkdirSync(join(dir, 'v2'));
    writeFileSync(join(dir, 'v2', 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    mkdirSync(join(dir, 'v1', 'memory'), { recursive: true });
    expect(await cgroupVersion(join(dir, 'v2'))).toBe(2);
    expect(await cgroupVersion(join(dir, 'v1'))).toBe(1);
    expect(await cgroupVersion(join(dir, 'missing'))).toBe(1);
  });
});
