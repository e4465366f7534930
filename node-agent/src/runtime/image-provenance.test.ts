// What a registry a tenant controls can make the node hand to an instance, against the real
// engine. An instance's image is always pulled through the registry front, and every blob of
// it must have come from its repository (fetched in this pull, recorded before, or fetched
// and checked now). Before: Docker 20.10 skips a pull whose image config is already on the
// node, and a layer it already holds, whoever's image brought them, so a manifest naming the
// ID of the provider's own image (its layers never asked for) ran that image for the tenant;
// an image the operator pulled with credentials ran for a tenant who had none; and an image
// config of hundreds of MB of labels made the agent exit (an engine answer past V8's longest
// string), again at every image-GC pass after its restart.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { digestOf, manifestOf, putImage, startTenantRegistry, type TenantRegistry } from '../../../test/support/tenant-registry.js';
import { ensureBusybox, layerOf, refusalOf } from './docker-test-images.js';
import { DockerRuntime, MAX_IMAGE_ANSWER_BYTES } from './docker-runtime.js';

const docker = new Docker();
const nodeId = `node-provenance-${process.pid}`;
const PROVIDER = `svc-test-provider/secret-${process.pid}:1`;
let registry: TenantRegistry;
let runtime: DockerRuntime;
let layer: { blob: Buffer; diffId: string };

const rejection = refusalOf;

const absent = async (ref: string) => (await docker.getImage(ref).inspect().then(() => false, () => true));
const task = (image: string) => ({ taskId: `inst_prov${Math.random().toString(36).slice(2, 8)}`, kind: 'instance' as const, image, gpuUuids: [], command: ['/hello'] });

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  registry = await startTenantRegistry();
  // The engine trusts loopback registries without TLS; the runtime checks no registry here.
  runtime = new DockerRuntime({ docker, nodeId });
  layer = await layerOf('#!/bin/sh\necho hello\n');
  // The provider's own image, on the node only (as a replica's pull or `docker load` leaves it).
  const builder = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['sh', '-c', 'echo PROVIDER-SECRET > /secret'], Labels: { 'svc.test': 'image-provenance' } });
  await builder.start();
  await builder.wait();
  const [repo, tag] = PROVIDER.split(':') as [string, string];
  await builder.commit({ repo, tag });
  await builder.remove({ force: true });
}, 60_000);

afterAll(async () => {
  await registry?.close();
  for (const c of await docker.listContainers({ all: true, filters: { label: [`svc.node=${nodeId}`] } })) await docker.getContainer(c.Id).remove({ force: true });
  for (const n of await docker.listNetworks()) if (n.Labels?.['svc.node'] === nodeId) await docker.getNetwork(n.Id).remove().catch(() => undefined);
  await docker.getImage(PROVIDER).remove({ force: true }).catch(() => undefined);
  // What the tenant's registry left on the node (a test that failed may have left more).
  for (const image of await docker.listImages()) {
    for (const tag of image.RepoTags ?? []) if (registry && tag.startsWith(`${registry.address}/`)) await docker.getImage(tag).remove({ force: true }).catch(() => undefined);
  }
});

describe("an instance's image from a registry the tenant controls", () => {
  it("is refused when its manifest names the ID of an image the node holds under another name (the provider's); the provider's image stays", async () => {
    const provider = await docker.getImage(PROVIDER).inspect();
    // The config is never served: Docker would ask for nothing when the ID is present. (The
    // layer is served, so the config's refusal is the one failure, whichever blob the agent
    // fetches first.)
    const served = Buffer.from('x');
    registry.blobs.set(digestOf(served), served);
    registry.manifests.set('tenant/steal:1', manifestOf({ digest: provider.Id, size: 1234 }, [{ digest: digestOf(served), size: served.length }]));
    const image = `${registry.address}/tenant/steal:1`;
    const err = await rejection(runtime.startTask(task(image)));
    expect(err.code).toBe('pull_failed');
    expect(err.message).toBe(
      `pull of ${image} failed: blob ${provider.Id} of tenant/steal: not found (BLOB_UNKNOWN: blob unknown)`,
    );
    expect(err.recoverable).toBe(false);
    expect(await absent(image)).toBe(true);
    expect((await docker.getImage(PROVIDER).inspect()).Id).toBe(provider.Id);
  }, 60_000);

  it("is refused when its manifest reuses a layer another repository brought to the node, under a config of its own, without serving that layer", async () => {
    putImage(registry, 'tenant/private:1', { config: { Cmd: ['/hello'], Labels: { owner: 'first' } } }, layer);
    const first = await runtime.startTask(task(`${registry.address}/tenant/private:1`));
    await runtime.destroyTask(first.containerId, { force: true });
    // Another repository: its own config over the first one's layer, which it does not have.
    const config = Buffer.from(JSON.stringify({ architecture: process.arch === 'arm64' ? 'arm64' : 'amd64', os: 'linux', config: { Cmd: ['/hello'], Labels: { owner: 'second' } }, rootfs: { type: 'layers', diff_ids: [layer.diffId] } }));
    registry.blobs.set(digestOf(config), config);
    registry.manifests.set('thief/reuse:1', manifestOf({ digest: digestOf(config), size: config.length }, [{ digest: digestOf(layer.blob), size: layer.blob.length }]));
    const blobs = new Map(registry.blobs);
    registry.blobs.delete(digestOf(layer.blob));
    try {
      const image = `${registry.address}/thief/reuse:1`;
      const err = await rejection(runtime.startTask(task(image)));
      expect(err.message).toMatch(new RegExp(`blob ${digestOf(layer.blob)} of thief/reuse: not found`));
      expect(await absent(image)).toBe(true);
    } finally {
      for (const [digest, blob] of blobs) registry.blobs.set(digest, blob);
    }
  }, 60_000);

  it('runs the same content from a second repository that serves it too (a mirror), checking the blobs the node already had', async () => {
    putImage(registry, 'tenant/original:1', { config: { Cmd: ['/hello'], Labels: { mirrored: 'yes' } } }, layer);
    registry.manifests.set('mirror/copy:1', registry.manifests.get('tenant/original:1')!);
    const original = await runtime.startTask(task(`${registry.address}/tenant/original:1`));
    await runtime.destroyTask(original.containerId, { force: true });
    const before = registry.log.length;
    const mirrored = await runtime.startTask(task(`${registry.address}/mirror/copy:1`));
    expect(mirrored.state).not.toBe('created');
    await runtime.destroyTask(mirrored.containerId, { force: true });
    // dockerd fetched nothing (the image was there); the agent fetched both blobs from the mirror.
    expect(registry.log.slice(before).filter((line) => line.startsWith('GET /v2/mirror/copy/blobs/')).length).toBe(2);
    // Once checked, not again.
    const again = registry.log.length;
    const third = await runtime.startTask(task(`${registry.address}/mirror/copy:1`));
    await runtime.destroyTask(third.containerId, { force: true });
    expect(registry.log.slice(again).filter((line) => line.includes('/blobs/'))).toEqual([]);
  }, 60_000);

  it('is pulled again at every start: one the operator pulled with credentials does not run for a tenant without them', async () => {
    registry.basicAuth = { username: 'operator', password: 'licence' };
    try {
      putImage(registry, 'tenant/licensed:1', { config: { Cmd: ['/hello'] } }, layer);
      const image = `${registry.address}/tenant/licensed:1`;
      const pulled = await docker.pull(image, { authconfig: { username: 'operator', password: 'licence', serveraddress: registry.address } });
      await new Promise((resolve, reject) => docker.modem.followProgress(pulled, (err: Error | null) => (err ? reject(err) : resolve(undefined))));
      const err = await rejection(runtime.startTask(task(image)));
      expect(err.code).toBe('pull_failed');
      expect(err.message).toMatch(/authentication required|unauthorized|no basic auth credentials/i);
      await docker.getImage(image).remove({ force: true });
    } finally {
      registry.basicAuth = undefined;
    }
  }, 60_000);

  it(`is refused, and removed, when Docker's description of it is more than ${MAX_IMAGE_ANSWER_BYTES / 1024 / 1024} MiB (labels Docker writes twice as long); the runtime lives on and starts the next`, async () => {
    // A config within the bound the agent fetches (4.5 MiB), whose U+2028 (3 bytes) Docker's JSON writes as `\u2028` (6).
    putImage(registry, 'tenant/labels:1', { config: { Cmd: ['/hello'], Labels: { big: '\u2028'.repeat(1.5 * 1024 * 1024) } } }, layer);
    const image = `${registry.address}/tenant/labels:1`;
    const err = await rejection(runtime.startTask(task(image)));
    expect(err.code).toBe('create_failed');
    expect(err.message).toMatch(/configuration is larger than 8\.0 MiB/);
    expect(await absent(image)).toBe(true);
    putImage(registry, 'tenant/small:1', { config: { Cmd: ['/hello'] } }, layer);
    const handle = await runtime.startTask(task(`${registry.address}/tenant/small:1`));
    expect(handle.containerId).toBeTruthy();
    await runtime.destroyTask(handle.containerId, { force: true });
  }, 60_000);
});
