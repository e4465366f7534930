// The capped devpts mounts, on this host's kernel (the tests run as root, as the agent
// does). What a tenant sees through them is in docker-runtime.test.ts.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { detachPts, devptsMountPoints, devptsOptions, mountPts, ptsDir, sweepPts, unmountPts } from './task-pts.js';

const root = mkdtempSync(join(tmpdir(), 'task-pts-'));
afterAll(async () => {
  for (const name of readdirSync(root)) await unmountPts(ptsDir(root, name));
  rmSync(root, { recursive: true, force: true });
});

const mounted = () => devptsMountPoints(readFileSync('/proc/self/mountinfo', 'utf8'));
const mountLine = (dir: string) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => l.split(' ')[4] === dir) ?? '';

describe('devptsMountPoints', () => {
  it('reads devpts mount points from mountinfo, escapes undone, other file systems left out', () => {
    const text = [
      '25 30 0:23 / /dev/pts rw,nosuid,noexec,relatime shared:3 - devpts devpts rw,gid=5,mode=620,ptmxmode=000',
      '43 27 0:39 / /var/lib/svc\\040agent/pts/svc-instance-a rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666,max=8',
      '26 30 0:24 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw',
      '',
    ].join('\n');
    expect([...devptsMountPoints(text)]).toEqual(['/dev/pts', '/var/lib/svc agent/pts/svc-instance-a']);
  });
});

describe('mountPts', () => {
  it("mounts a fresh devpts with Docker's options and the cap, once however often it is asked", async () => {
    expect(devptsOptions(8)).toBe('newinstance,nosuid,noexec,gid=5,mode=0620,ptmxmode=0666,max=8');
    const dir = ptsDir(root, 'svc-instance-one');
    await mountPts(dir, 8);
    await mountPts(dir, 8);
    expect(mountLine(dir)).toMatch(/ rw,nosuid,noexec,.* - devpts devpts rw,gid=5,mode=620,ptmxmode=666,max=8$/);
    expect(readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.split(' ')[4] === dir)).toHaveLength(1);
    // The cap holds on the host side too: the ninth terminal is refused.
    const held = [];
    for (let i = 0; i < 8; i++) held.push(await open(join(dir, 'ptmx'), 'r+'));
    await expect(open(join(dir, 'ptmx'), 'r+')).rejects.toMatchObject({ code: 'ENOSPC' });
    for (const h of held) await h.close();

    await detachPts(dir);
    expect(mounted().has(dir)).toBe(false);
    expect(existsSync(dir)).toBe(true);
    await unmountPts(dir);
    expect(existsSync(dir)).toBe(false);
    await unmountPts(dir); // gone already: nothing to do
  });

  it('sweeps what containers that no longer exist left: mounted or not', async () => {
    const [kept, leftMounted, leftEmpty] = ['svc-instance-kept', 'svc-instance-crashed', 'svc-instance-detached'];
    await mountPts(ptsDir(root, kept), 4);
    await mountPts(ptsDir(root, leftMounted), 4);
    mkdirSync(ptsDir(root, leftEmpty));
    expect((await sweepPts(root, new Set([kept]))).sort()).toEqual([leftMounted, leftEmpty].sort());
    expect(readdirSync(root)).toEqual([kept]);
    expect(mounted().has(ptsDir(root, kept))).toBe(true);
    expect(mounted().has(ptsDir(root, leftMounted))).toBe(false);
    expect(await sweepPts(join(root, 'never-made'), new Set())).toEqual([]);
  });
});
