import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { limitRunningSocketMemory, limitSocketMemory, memoryCgroupOf, needsSocketLimits, releaseSocketCgroup } from './socket-memory.js';

// A memory hierarchy as cgroup v1 shows it, in plain files: the root holds the TCP counter's files.
const withCounter = mkdtempSync(join(tmpdir(), 'memcg-'));
writeFileSync(join(withCounter, 'memory.kmem.tcp.limit_in_bytes'), '9223372036854771712\n');
const withoutCounter = mkdtempSync(join(tmpdir(), 'memcg-'));
afterAll(() => {
  for (const dir of [withCounter, withoutCounter]) rmSync(dir, { recursive: true, force: true });
});

describe('needsSocketLimits', () => {
  it.each([
    ['cgroup v1, cgroupfs, the TCP counter there', { CgroupVersion: '1', CgroupDriver: 'cgroupfs' }, withCounter, true],
    ['cgroup v2: socket buffers count against memory.max already', { CgroupVersion: '2', CgroupDriver: 'cgroupfs' }, withCounter, false],
    ['the systemd driver: the cgroup is a scope the agent cannot make first', { CgroupVersion: '1', CgroupDriver: 'systemd' }, withCounter, false],
    ['a kernel without the v1 TCP counter', { CgroupVersion: '1', CgroupDriver: 'cgroupfs' }, withoutCounter, false],
    ['an engine that does not say', {}, withCounter, false],
  ])('%s', async (_what, info, root, expected) => {
    expect(await needsSocketLimits(info, root)).toBe(expected);
  });
});

describe('limitSocketMemory', () => {
  it("makes the container's memory cgroup under /docker with the TCP limit in it", async () => {
    await limitSocketMemory('abc123', 256 * 1024 * 1024, withCounter);
    expect(memoryCgroupOf('abc123', withCounter)).toBe(join(withCounter, 'docker', 'abc123'));
    expect(readFileSync(join(withCounter, 'docker', 'abc123', 'memory.kmem.tcp.limit_in_bytes'), 'utf8')).toBe(String(256 * 1024 * 1024));
    // Again (a retried start): the cgroup is there, the limit is written again.
    mkdirSync(join(withCounter, 'docker', 'abc123'), { recursive: true });
    await limitSocketMemory('abc123', 128, withCounter);
    expect(readFileSync(join(withCounter, 'docker', 'abc123', 'memory.kmem.tcp.limit_in_bytes'), 'utf8')).toBe('128');
  });

  it('releases the cgroup of a container that never ran, and minds none being there', async () => {
    // A real cgroup directory holds only the kernel's files and goes with rmdir; here, an empty one.
    mkdirSync(join(withCounter, 'docker', 'never-ran'), { recursive: true });
    await releaseSocketCgroup('never-ran', withCounter);
    expect(existsSync(join(withCounter, 'docker', 'never-ran'))).toBe(false);
    await releaseSocketCgroup('never-ran', withCounter);
  });
});

describe('limitRunningSocketMemory', () => {
  it("sets the limit of a running container's cgroup where it is, and makes none where it is not", async () => {
    mkdirSync(join(withCounter, 'docker', 'adopted'), { recursive: true });
    writeFileSync(join(withCounter, 'docker', 'adopted', 'memory.kmem.tcp.limit_in_bytes'), '9223372036854771712\n');
    expect(await limitRunningSocketMemory('adopted', 4096, withCounter)).toBe(true);
    expect(readFileSync(join(withCounter, 'docker', 'adopted', 'memory.kmem.tcp.limit_in_bytes'), 'utf8')).toBe('4096');
    expect(await limitRunningSocketMemory('elsewhere', 4096, withCounter)).toBe(false);
    expect(existsSync(join(withCounter, 'docker', 'elsewhere'))).toBe(false);
  });
});
