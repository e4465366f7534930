// Directory listings of an instance's container on the real engine: through the agent's
// lister inside the container when it is mounted there (as in every instance behind the log
// limiter), from the archive API's tar otherwise, with the same answer; the lister runs as
// the container's user, so it sees what that user may see.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { ensureBusybox } from '../runtime/docker-test-images.js';
import { buildLogInit, LOG_INIT_TARGET } from '../runtime/log-init.js';
import { ContainerFs, type FileStat } from './container-fs.js';

const docker = new Docker();
const run = randomBytes(4).toString('hex');
const containers: Docker.Container[] = [];
let dir: string;
let lister: string;
let made = 0;

const FILL_DATA = 'mkdir -p /data/sub && truncate -s 256M /data/big && printf abc > "/data/we\nird" && ln -s /etc/passwd "/data/link x"';

/** A busybox container, the lister mounted or not, running as `user` after `setup`. */
async function container(withLister: boolean, user = '', setup = FILL_DATA): Promise<ContainerFs> {
  const c = await docker.createContainer({
    name: `svc-test-fs-${run}-${++made}`,
    Image: BUSYBOX_IMAGE,
    User: user,
    Cmd: ['sh', '-c', `${setup} && touch /tmp/ready && sleep 1000`],
    Labels: { 'svc.test': 'container-fs' },
    HostConfig: withLister ? { Mounts: [{ Type: 'bind', Source: lister, Target: LOG_INIT_TARGET, ReadOnly: true }] } : {},
  });
  containers.push(c);
  await c.start();
  const fs = new ContainerFs(docker, c.id);
  await expect.poll(() => fs.lstat('/tmp/ready').then(() => true, () => false), { timeout: 10_000 }).toBe(true);
  return fs;
}

const shape = (entries: FileStat[]) =>
  entries.map(({ name, mode, size, linkTarget }) => ({ name, mode, size, linkTarget })).sort((a, b) => a.name.localeCompare(b.name));

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  dir = await mkdtemp(join(tmpdir(), 'svc-container-fs-'));
  lister = await buildLogInit(dir);
});

afterAll(async () => {
  await Promise.all(containers.map((c) => c.remove({ force: true })));
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('ContainerFs.readDir', () => {
  it('lists through the lister in the container and from the archive alike: names with spaces and newlines, sizes, symlink targets', async () => {
    const [listed, archived] = await Promise.all([container(true), container(false)]);
    const expected = [
      { name: 'big', mode: 0o100644, size: 2 ** 28, linkTarget: undefined },
      { name: 'link x', mode: 0o120777, size: 0, linkTarget: '/etc/passwd' },
      { name: 'sub', mode: 0o40755, size: 0, linkTarget: undefined },
      { name: 'we\nird', mode: 0o100644, size: 3, linkTarget: undefined },
    ];
    // The archive way sends file contents too, and each entry's is paced before it is read past.
    const paced = { listed: 0, archived: 0 };
    expect(shape(await listed.readDir('/data', async (bytes) => void (paced.listed += bytes)))).toEqual(expected);
    expect(shape(await archived.readDir('/data', async (bytes) => void (paced.archived += bytes)))).toEqual(expected);
    expect(paced.listed).toBe(0);
    expect(paced.archived).toBeGreaterThan(2 ** 28);
    await expect(listed.readDir('/data/big')).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(listed.readDir('/nope')).rejects.toMatchObject({ code: 'ENOENT' });
  }, 60_000);

  it("lists as the container's user: a directory that user may not read is refused", async () => {
    const asNobody = await container(true, '65534', 'mkdir /tmp/mine');
    await expect(asNobody.readDir('/root')).rejects.toMatchObject({ code: 'EACCES', message: expect.stringMatching(/Permission denied/) });
    expect((await asNobody.readDir('/tmp')).map((e) => e.name).sort()).toEqual(['mine', 'ready']);
  }, 60_000);
});
