// What the disk watch reads, against the real engine: the disk a container takes on the
// host, by every way a tenant can fill it, and the log Docker keeps of what it prints.
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE, dockerAvailable, REGISTRY } from '../../../test/support/images.js';
import { LABEL_NODE, type TaskSpec } from './container-spec.js';
import { sumFirstColumn, type DiskUsage } from './disk-usage.js';
import { DockerRuntime } from './docker-runtime.js';
import { commitAndPush, deleteFreshImage, ensureBusybox } from './docker-test-images.js';
import { RuntimeError } from './runtime.js';

const docker = new Docker();
const run = randomBytes(4).toString('hex');
const nodeId = `test-disk-${run}`;
const runtime = new DockerRuntime({ docker, nodeId });
const MIB = 1024 ** 2;
/** An image like busybox that declares a VOLUME, as many public images do. */
const VOLUME_IMAGE = `${REGISTRY}/svc/runtime-test:volume-${run}`;

let seq = 0;
const start = (script: string, image = BUSYBOX_IMAGE) => {
  const spec: TaskSpec = { taskId: `d${run}-${++seq}`, kind: 'instance', image, gpuUuids: [], command: ['sh', '-c', script] };
  return runtime.startTask(spec);
};

/** Polls the usage until `done` accepts it (the container writes after it started). */
async function usageWhen(containerId: string, done: (usage: DiskUsage) => boolean, timeoutMs = 20_000): Promise<DiskUsage> {
  const deadline = Date.now() + timeoutMs;
  let usage = await runtime.diskUsage(containerId);
  while (!done(usage) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    usage = await runtime.diskUsage(containerId);
  }
  return usage;
}

/** Bytes, once at least `atLeast` are counted. */
const bytesOnce = async (containerId: string, atLeast: number): Promise<number> => (await usageWhen(containerId, (u) => u.bytes >= atLeast)).bytes;

async function logBytes(containerId: string): Promise<number> {
  const path = (await docker.getContainer(containerId).inspect()).LogPath;
  let total = 0;
  for (const file of [path, `${path}.1`, `${path}.2`, `${path}.3`]) total += await stat(file).then((s) => s.size, () => 0);
  return total;
}

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  const builder = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['true'], Labels: { 'svc.test': 'image-builder' } });
  await commitAndPush(docker, builder, VOLUME_IMAGE, 'VOLUME /data');
  await builder.remove({ force: true });
});

afterAll(async () => {
  const leftovers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_NODE}=${nodeId}`] } });
  await Promise.all(leftovers.map((c) => runtime.destroyTask(c.Id, { force: true })));
  await deleteFreshImage(docker, VOLUME_IMAGE);
});

describe('the disk a container takes on the host', () => {
  it('counts what it writes in its own file system, in blocks: a sparse file of 10 GiB counts nothing', async () => {
    const h = await start('dd if=/dev/zero of=/fill bs=1M count=40 && truncate -s 10G /sparse && echo > /written && sleep 600');
    const bytes = await bytesOnce(h.containerId, 40 * MIB);
    expect(bytes).toBeGreaterThanOrEqual(40 * MIB);
    expect(bytes).toBeLessThan(42 * MIB);
  });

  it("counts what it writes into /etc/hosts, /etc/hostname and /etc/resolv.conf, which Docker keeps on the host's disk outside the container's layer", async () => {
    const h = await start('for f in hosts hostname resolv.conf; do dd if=/dev/zero of=/etc/$f bs=1M count=10; done && sleep 600');
    const bytes = await bytesOnce(h.containerId, 30 * MIB);
    expect(bytes).toBeGreaterThanOrEqual(30 * MIB);
    expect(bytes).toBeLessThan(32 * MIB);
  });

  it('counts a volume its image declares, which Docker creates outside the container', async () => {
    const h = await start('dd if=/dev/zero of=/data/fill bs=1M count=30 && sleep 600', VOLUME_IMAGE);
    const mounts = (await docker.getContainer(h.containerId).inspect()).Mounts;
    expect(mounts).toEqual([expect.objectContaining({ Type: 'volume', Destination: '/data' })]);
    const bytes = await bytesOnce(h.containerId, 30 * MIB);
    expect(bytes).toBeGreaterThanOrEqual(30 * MIB);
    expect(bytes).toBeLessThan(32 * MIB);
  });

  it('counts a file deleted while a process still holds it open, which no directory shows', async () => {
    const h = await start('exec 3>/hidden && rm /hidden && dd if=/dev/zero bs=1M count=30 >&3 && sleep 600');
    const bytes = await bytesOnce(h.containerId, 30 * MIB);
    expect(bytes).toBeGreaterThanOrEqual(30 * MIB);
    expect(bytes).toBeLessThan(32 * MIB);
    // The proof that a walk alone misses it: the engine's own count of the layer.
    const sized = (await docker.getContainer(h.containerId).inspect({ size: true } as Docker.ContainerInspectOptions)) as { SizeRw?: number };
    expect(sized.SizeRw ?? 0).toBeLessThan(MIB);
  });

  it("does not count the container's /dev/shm, which its memory limit pays for", async () => {
    // The marker, written last, is what the first non-zero measurement sees: the shm file, written and deleted but held open, is in place by then.
    const h = await start('dd if=/dev/zero of=/dev/shm/fill bs=1M count=30 && exec 3</dev/shm/fill && rm /dev/shm/fill && echo done > /marker && sleep 600');
    const bytes = (await usageWhen(h.containerId, (u) => u.bytes > 0)).bytes;
    expect(bytes).toBeGreaterThan(0);
    expect(bytes).toBeLessThan(MIB);
  });

  it('counts files, which fill a file system without taking bytes: 3,000 empty ones', async () => {
    const h = await start('mkdir /many && cd /many && i=0; while [ $i -lt 3000 ]; do : > f$i; i=$((i+1)); done; echo done > /marker; sleep 600');
    const usage = await usageWhen(h.containerId, (u) => u.files >= 3000);
    expect(usage.files).toBeGreaterThanOrEqual(3000);
    expect(usage.files).toBeLessThan(3100);
    // Empty files: the directory's blocks only, well under a megabyte.
    expect(usage.bytes).toBeLessThan(MIB);
  });

  it('is not_found once the container is gone', async () => {
    const h = await start('sleep 600');
    await runtime.destroyTask(h.containerId, { force: true });
    await expect(runtime.diskUsage(h.containerId)).rejects.toSatisfy((err: unknown) => err instanceof RuntimeError && err.code === 'not_found');
  });
});

describe("the container's log", () => {
  it('is rotated at 3 files of 10 MB however much the container prints', async () => {
    // 60 MB of output, 1 KB lines; Docker's json-file would keep all of it (and more) without rotation.
    const h = await start("yes $(printf '%01000d' 0) | head -c 60000000; echo finished; sleep 600");
    const deadline = Date.now() + 60_000;
    while (!(await docker.getContainer(h.containerId).logs({ stdout: true, tail: 1 })).toString('utf8').includes('finished')) {
      if (Date.now() > deadline) throw new Error('the container did not finish printing in 60 s');
      await new Promise((r) => setTimeout(r, 250));
    }
    const kept = await logBytes(h.containerId);
    expect(kept).toBeGreaterThan(10 * 1000 * 1000);
    expect(kept).toBeLessThanOrEqual(3 * 10 * 1024 * 1024 + 64 * 1024);
  }, 90_000);
});

describe('sumFirstColumn', () => {
  it.each([
    ['one path', '4096\t/a\n', 4096],
    ['several paths', '4096\t/a\n1048576\t/b\n', 1_052_672],
    ['nothing printed (every path vanished)', '', 0],
    ['a line that is not a count is skipped', 'total\n8192\t/a\n', 8192],
  ])('%s', (_name, text, expected) => {
    expect(sumFirstColumn(text)).toBe(expected);
  });
});
