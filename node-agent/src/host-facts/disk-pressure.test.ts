// Disk pressure on a real file system: a 1 MiB tmpfs mounted for the test (root, as the
// agent runs), filled past the threshold and emptied again.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerRootDir } from '../runtime/disk-usage.js';
import { DiskPressureWatch, dockerDiskFacts, underPressure } from './disk-pressure.js';

const quiet = { info: () => undefined, warn: () => undefined };
let mount: string;

beforeAll(() => {
  mount = mkdtempSync(join(tmpdir(), 'disk-pressure-'));
  // 1 MiB and 200 inodes: each can run out first.
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,nr_inodes=200', 'tmpfs', mount]);
});

afterAll(() => {
  execFileSync('umount', [mount]);
  rmSync(mount, { recursive: true, force: true });
});

describe('underPressure', () => {
  it.each([
    [89, 100, 90, false],
    [90, 100, 90, true],
    [100, 100, 90, true],
    [0, 0, 90, false],
  ])('%d of %d bytes at %d%%: %s', (used, size, percent, expected) => {
    expect(underPressure(used, size, percent)).toBe(expected);
  });
});

describe('DiskPressureWatch', () => {
  it('says when the disk fills past the threshold and when it has room again, once each', async () => {
    const watch = new DiskPressureWatch(async () => mount, 80, 60_000, quiet);
    let changes = 0;
    watch.onChange(() => changes++);
    expect(await watch.current()).toMatchObject({ mount, sizeBytes: 1024 * 1024, pressure: false });

    writeFileSync(join(mount, 'fill'), Buffer.alloc(900 * 1024));
    const full = await watch.check();
    expect(full).toMatchObject({ pressure: true });
    expect(full!.usedBytes).toBeGreaterThanOrEqual(900 * 1024);
    expect(dockerDiskFacts(full)).toEqual({
      docker_disk: { mount, size_bytes: 1024 * 1024, used_bytes: full!.usedBytes, files_total: 200, files_used: full!.filesUsed },
      disk_pressure: true,
    });
    await watch.check();
    expect(changes).toBe(1);

    rmSync(join(mount, 'fill'));
    expect(await watch.check()).toMatchObject({ pressure: false });
    expect(changes).toBe(2);
    expect(await watch.current()).toMatchObject({ pressure: false });
  });

  it('says so too when the inodes run out first: 170 empty files take no bytes but 85% of them', async () => {
    const watch = new DiskPressureWatch(async () => mount, 80, 60_000, quiet);
    expect(await watch.check()).toMatchObject({ filesTotal: 200, pressure: false });
    mkdirSync(join(mount, 'many'));
    for (let i = 0; i < 170; i++) writeFileSync(join(mount, 'many', `f${i}`), '');
    const full = await watch.check();
    expect(full).toMatchObject({ pressure: true });
    expect(full!.usedBytes).toBeLessThan(100 * 1024);
    expect(full!.filesUsed).toBeGreaterThanOrEqual(170);
    rmSync(join(mount, 'many'), { recursive: true });
    expect(await watch.check()).toMatchObject({ pressure: false });
  });

  it("reads Docker's own data root, and reports nothing without an engine", async () => {
    const docker = new Docker();
    const root = await dockerRootDir(docker);
    const watch = new DiskPressureWatch(() => dockerRootDir(docker), 100, 60_000, quiet);
    const disk = await watch.current();
    expect(disk).toMatchObject({ mount: root, pressure: false });
    expect(disk!.sizeBytes).toBeGreaterThan(disk!.usedBytes);
    const without = new DiskPressureWatch(() => dockerRootDir(new Docker({ socketPath: '/nonexistent.sock' })), 90, 60_000, quiet);
    expect(await without.current()).toBeNull();
    expect(dockerDiskFacts(null)).toEqual({});
  });
});
