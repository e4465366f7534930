// Image garbage collection against the real engine and the loopback registry: only images
// this agent ran are removed, least recently used first, never one a container uses.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { LABEL_NODE } from './container-spec.js';
import { DockerRuntime } from './docker-runtime.js';
import { digestOf, putImage, startTenantRegistry, type TenantRegistry } from '../../../test/support/tenant-registry.js';
import { deleteFreshImage, ensureBusybox, layerOf, pushFreshImage } from './docker-test-images.js';
import { ImageGc, ImageUseLog } from './image-gc.js';

const docker = new Docker();
const run = randomBytes(4).toString('hex');
const nodeId = `test-imagegc-${run}`;
const quiet = { info: () => undefined, warn: () => undefined };
const useLogFile = join(mkdtempSync(join(tmpdir(), 'image-gc-')), 'image-use.json');
const fresh: string[] = [];

let clock = 1_000;
const useLog = new ImageUseLog(useLogFile);
/** Removes whatever it may, whatever the disk: the high and low marks at 0%. */
const eager = new ImageGc(docker, useLog, { highPercent: 0, lowPercent: 0, intervalMs: 60_000 }, quiet, () => clock);
const runtime = new DockerRuntime({ docker, nodeId, imageUsed: (ref) => eager.recordUse(ref) });

let registry: TenantRegistry;
const madeById: string[] = [];

const present = (ref: string) => docker.getImage(ref).inspect().then(() => true, () => false);

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  for (const name of ['first', 'second', 'running']) fresh.push(await pushFreshImage(docker, `gc-${name}-${run}`, 200_000));
  registry = await startTenantRegistry();
}, 120_000);

afterAll(async () => {
  const leftovers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_NODE}=${nodeId}`] } });
  await Promise.all(leftovers.map((c) => runtime.destroyTask(c.Id, { force: true })));
  for (const ref of fresh) await deleteFreshImage(docker, ref).catch(() => undefined);
  for (const image of await docker.listImages({ filters: { reference: [`${registry?.address}/*/*`] } }).catch(() => [])) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  for (const id of madeById) await docker.getImage(id).remove({ force: true }).catch(() => undefined);
  await registry?.close();
});

describe('ImageGc', () => {
  it('removes the images it ran that no container uses, oldest first; keeps the one running and every image it never ran', async () => {
    const [first, second, running] = fresh as [string, string, string];
    const task = (image: string) => ({ taskId: `g${run}-${randomBytes(3).toString('hex')}`, kind: 'instance' as const, image, gpuUuids: [], command: ['sleep', '600'] });
    for (const image of [second, first, running]) {
      clock += 1_000;
      const h = await runtime.startTask(task(image));
      if (image !== running) await runtime.destroyTask(h.containerId, { force: true });
    }
    // A disk under the marks: nothing goes.
    const patient = new ImageGc(docker, new ImageUseLog(useLogFile), { highPercent: 100, lowPercent: 100, intervalMs: 60_000 }, quiet);
    expect(await patient.collect()).toEqual([]);

    expect(await eager.collect()).toEqual([second, first]);
    expect({ first: await present(first), second: await present(second), running: await present(running), busybox: await present(BUSYBOX_IMAGE) }).toEqual({
      first: false,
      second: false,
      running: true,
      busybox: true,
    });
    // What a restarted agent reads back: only the image still there.
    expect([...new ImageUseLog(useLogFile).entries.keys()]).toEqual([running]);
  });

  it('forgets an image someone else removed, and collects one it ran again', async () => {
    const [first, second] = fresh as [string, string];
    const rerun = async (image: string) => {
      clock += 1_000;
      const h = await runtime.startTask({ taskId: `g${run}-${randomBytes(3).toString('hex')}`, kind: 'instance', image, gpuUuids: [], command: ['sleep', '600'] });
      await runtime.destroyTask(h.containerId, { force: true });
    };
    await rerun(second);
    await docker.getImage(second).remove();
    await rerun(first);
    expect([...useLog.entries.keys()]).toEqual(expect.arrayContaining([second, first]));
    expect(await eager.collect()).toEqual([first]);
    expect(await present(first)).toBe(false);
    expect([...new ImageUseLog(useLogFile).entries.keys()]).not.toContain(second);
  });

  it("collects the image an instance's tag named before the tenant pushed another under it, and not while a container uses it", async () => {
    const pulling = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed: [registry.address] }, imageUsed: (ref) => eager.recordUse(ref) });
    const layer = await layerOf(`#!/bin/sh\necho moved ${run}\n`);
    const image = `${registry.address}/tenant/moving:1`;
    const startOnce = async (version: string, keep = false) => {
      putImage(registry, 'tenant/moving:1', { config: { Cmd: ['/hello'], Labels: { version } } }, layer);
      clock += 1_000;
      const h = await pulling.startTask({ taskId: `g${run}-${randomBytes(3).toString('hex')}`, kind: 'instance', image, gpuUuids: [], command: ['/hello'] });
      if (!keep) await pulling.destroyTask(h.containerId, { force: true });
      const id = (await docker.getImage(image).inspect()).Id;
      // Nameless once its tag moves on: removed by ID after the suite, should a check fail first.
      madeById.push(id);
      return { id, containerId: h.containerId };
    };
    const first = await startOnce('1', true);
    const second = await startOnce('2');
    expect(second.id).not.toBe(first.id);
    // The first is nameless now. Its instance still runs: it stays, while the unused second goes by its name.
    expect((await docker.getImage(first.id).inspect()).RepoTags).toEqual([]);
    expect(await eager.collect()).toEqual([image]);
    expect(await present(first.id)).toBe(true);
    await pulling.destroyTask(first.containerId, { force: true });
    expect(await eager.collect()).toEqual([first.id]);
    expect(await present(first.id)).toBe(false);
    expect([...new ImageUseLog(useLogFile).entries.keys()]).not.toContain(first.id);
  }, 60_000);

  it("never collects an image the operator pulled by digest (no tag, only a digest name), even when a tenant's tag named it and moved on", async () => {
    const layer = await layerOf(`#!/bin/sh\necho provider ${run}\n`);
    const provider = await startTenantRegistry();
    try {
      const config = { config: { Cmd: ['/hello'], Labels: { owner: 'provider' } } };
      putImage(provider, 'prov/server:1', config, layer);
      putImage(registry, 'tenant/same:1', config, layer);
      const byDigest = `${provider.address}/prov/server@${digestOf(provider.manifests.get('prov/server:1')!)}`;
      await new Promise((resolve, reject) => docker.pull(byDigest, (err: Error | null, stream: NodeJS.ReadableStream) => (err ? reject(err) : docker.modem.followProgress(stream, (e: Error | null) => (e ? reject(e) : resolve(undefined))))));
      const providers = (await docker.getImage(byDigest).inspect()).Id;
      const gc = new ImageGc(docker, new ImageUseLog(), { highPercent: 0, lowPercent: 0, intervalMs: 60_000 }, quiet);
      const pulling = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed: [registry.address] }, imageUsed: (ref) => gc.recordUse(ref) });
      const image = `${registry.address}/tenant/same:1`;
      const first = await pulling.startTask({ taskId: `g${run}-${randomBytes(3).toString('hex')}`, kind: 'instance', image, gpuUuids: [], command: ['/hello'] });
      // The same content: the tenant's name went onto the provider's image.
      expect(first.image).toBe(providers);
      await pulling.destroyTask(first.containerId, { force: true });
      putImage(registry, 'tenant/same:1', { config: { Cmd: ['/hello'], Labels: { owner: 'tenant' } } }, layer);
      const second = await pulling.startTask({ taskId: `g${run}-${randomBytes(3).toString('hex')}`, kind: 'instance', image, gpuUuids: [], command: ['/hello'] });
      await pulling.destroyTask(second.containerId, { force: true });
      expect(await gc.collect()).not.toContain(providers);
      expect(await present(providers)).toBe(true);
      await docker.getImage(providers).remove({ force: true });
    } finally {
      await provider.close();
    }
  }, 60_000);
});
