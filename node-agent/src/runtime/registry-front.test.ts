// An instance's image comes to dockerd through the agent's registry front, against the real
// engine and a registry the tenant controls (test/support/tenant-registry.ts). Before:
// dockerd talked to the tenant's registry itself, so a registry could make it read a
// manifest of any size whole (a 600 MiB one took dockerd from 1.1 to 2.7 GB, kept after),
// and send it to the host's loopback (a token realm or a blob redirect to 127.0.0.1, which
// Go never sends through the pull proxy). Now the agent resolves the manifest itself with a
// bound, every connection it makes is checked, and dockerd talks to the front alone.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { dockerAvailable } from '../../../test/support/images.js';
import { digestOf, manifestOf, putImage, startTenantRegistry, type TenantRegistry } from '../../../test/support/tenant-registry.js';
import { startStallingRegistry } from '../../../test/support/stalling-registry.js';
import { layerOf, refusalOf } from './docker-test-images.js';
import { DockerRuntime } from './docker-runtime.js';
import { MAX_MANIFEST_BYTES, MEDIA_TYPES, nodePlatform } from './image-manifest.js';

const docker = new Docker();
const nodeId = `node-front-${process.pid}`;
let registry: TenantRegistry;
let runtime: DockerRuntime;
let layer: { blob: Buffer; diffId: string };
/** A service on the host's loopback that must never be reached: counts its requests. */
let canary: { server: Server; url: string; hits: string[] };
const started: string[] = [];
/** The registries the node's operator listed (they are on loopback here). */
const allowed: string[] = [];

const rejection = refusalOf;

const REFUSED = (host: string) => `refused by the node: ${host} is not a public address this node reaches for instances`;
const task = (image: string) => ({ taskId: `inst_front${Math.random().toString(36).slice(2, 8)}`, kind: 'instance' as const, image, gpuUuids: [], command: ['/hello'] });
/** Every request the tenant's registry saw came from the agent, none from dockerd. */
const onlyTheAgentAsked = () => expect(new Set(registry.clients)).toEqual(new Set(['svc-node-agent']));

async function start(image: string) {
  const handle = await runtime.startTask(task(image));
  started.push(handle.containerId);
  return handle;
}

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  registry = await startTenantRegistry();
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"token":"host-secret"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  canary = { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
  // The tenant's registry is on loopback here, so the operator lists it; the canary is not.
  allowed.push(registry.address);
  runtime = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed } });
  layer = await layerOf('#!/bin/sh\necho hello\n');
}, 60_000);


afterAll(async () => {
  for (const id of started) await runtime?.destroyTask(id, { force: true }).catch(() => undefined);
  // What a failed test may have left: every container and network of this test's node.
  for (const c of await docker.listContainers({ all: true, filters: { label: [`svc.node=${nodeId}`] } })) await docker.getContainer(c.Id).remove({ force: true });
  for (const n of await docker.listNetworks()) if (n.Labels?.['svc.node'] === nodeId) await docker.getNetwork(n.Id).remove().catch(() => undefined);
  const ours = await docker.listImages({ filters: { reference: [`${registry?.address}/*/*`] } }).catch(() => []);
  for (const image of ours) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
  await registry?.close();
  await new Promise<void>((resolve) => (canary ? canary.server.close(() => resolve()) : resolve()));
});

describe("an instance's image through the registry front", () => {
  it('is pulled by dockerd from the front only: the tenant registry hears from the agent alone, and the image carries the name the tenant gave', async () => {
    registry.clients.length = 0;
    putImage(registry, 'tenant/app:1', { config: { Cmd: ['/hello'] } }, layer);
    const image = `${registry.address}/tenant/app:1`;
    const handle = await start(image);
    expect(handle.state).not.toBe('created');
    expect(registry.log.filter((line) => line.includes('/blobs/')).length).toBeGreaterThanOrEqual(2);
    onlyTheAgentAsked();
    const inspected = await docker.getImage(image).inspect();
    expect(inspected.RepoTags).toEqual([image]);
    expect([...inspected.RepoTags, ...inspected.RepoDigests].filter((name) => name.includes('/pull/'))).toEqual([]);
  }, 60_000);

  it('runs an image pinned by digest, named on the node by its repository and digest', async () => {
    putImage(registry, 'tenant/pinned:1', { config: { Cmd: ['/hello'] } }, layer);
    const digest = digestOf(registry.manifests.get('tenant/pinned:1')!);
    const handle = await start(`${registry.address}/tenant/pinned@${digest}`);
    const named = await docker.getImage(`${registry.address}/tenant/pinned:${digest.replace(':', '-')}`).inspect();
    expect(handle.image).toBe(named.Id);
  }, 60_000);

  it("makes the container from the image its pull proved, even when the name is given to another image before the create (a tag shaped like the pinned image's local name)", async () => {
    putImage(registry, 'tenant/race:1', { config: { Cmd: ['/hello'], Labels: { which: 'pinned' } } }, layer);
    const digest = digestOf(registry.manifests.get('tenant/race:1')!);
    const local = `${registry.address}/tenant/race:${digest.replace(':', '-')}`;
    // What the tenant's tag `sha256-<hex>` brings: another image, whose volumes nest (refused to instances).
    putImage(registry, `tenant/race:${digest.replace(':', '-')}`, { config: { Cmd: ['/hello'], Labels: { which: 'other' }, Volumes: { '/a': {}, '/a/b': {} } } }, layer);
    const other = await refusalOf(runtime.startTask(task(local)));
    expect(other.message).toMatch(/declares the volume \/a\/b/);
    await docker.pull(local).then((stream) => new Promise((resolve, reject) => docker.modem.followProgress(stream, (err: Error | null) => (err ? reject(err) : resolve(undefined)))));
    const otherId = (await docker.getImage(local).inspect()).Id;
    // Another pull of that tag lands between this start's checks and its create.
    const create = docker.createContainer.bind(docker);
    const landing = vi.spyOn(docker, 'createContainer').mockImplementation(async (options) => {
      const [repo, tag] = [local.slice(0, local.lastIndexOf(':')), local.slice(local.lastIndexOf(':') + 1)];
      await docker.getImage(otherId).tag({ repo, tag });
      return create(options);
    });
    try {
      const handle = await start(`${registry.address}/tenant/race@${digest}`);
      const container = await docker.getContainer(handle.containerId).inspect();
      expect(container.Config.Labels?.which).toBe('pinned');
      expect(container.Mounts).toEqual([]);
      expect((await docker.getImage(local).inspect()).Id).toBe(otherId);
      // The name went to the other image: this one is left without any, for the test to remove.
      await runtime.destroyTask(handle.containerId, { force: true });
      await docker.getImage(handle.image).remove({ force: true });
    } finally {
      landing.mockRestore();
    }
  }, 60_000);

  it("picks this node's platform from an image index, and refuses an index without it", async () => {
    putImage(registry, 'tenant/multi:amd', { config: { Cmd: ['/hello'] } }, layer);
    const platformManifest = registry.manifests.get('tenant/multi:amd')!;
    const index = (entries: Array<{ architecture: string }>) =>
      Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_TYPES.ociIndex, manifests: entries.map((platform) => ({ mediaType: MEDIA_TYPES.dockerManifest, digest: platform.architecture === nodePlatform().architecture ? digestOf(platformManifest) : `sha256:${'e'.repeat(64)}`, size: platformManifest.length, platform: { os: 'linux', ...platform } })) }));
    registry.manifests.set('tenant/multi:1', index([{ architecture: 's390x' }, { architecture: nodePlatform().architecture }]));
    await start(`${registry.address}/tenant/multi:1`);
    registry.manifests.set('tenant/multi:2', index([{ architecture: 's390x' }]));
    const err = await rejection(runtime.startTask(task(`${registry.address}/tenant/multi:2`)));
    expect(err.message).toBe(`pull of ${registry.address}/tenant/multi:2 refused: it has no image for linux/${nodePlatform().architecture}, this node's platform`);
    expect(err.recoverable).toBe(false);
  }, 60_000);

  it(`refuses a manifest past ${MAX_MANIFEST_BYTES / 1024 / 1024} MiB, streamed without a length, before dockerd reads any of it`, async () => {
    registry.clients.length = 0;
    registry.manifests.set('tenant/huge:1', Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: MEDIA_TYPES.dockerManifest, padding: 'x'.repeat(MAX_MANIFEST_BYTES) })));
    registry.chunked = true;
    try {
      const err = await rejection(runtime.startTask(task(`${registry.address}/tenant/huge:1`)));
      expect(err.message).toMatch(/^pull of .*tenant\/huge:1 failed: manifest tenant\/huge:1 at .* is larger than 4194304 bytes, more than this node reads$/);
      expect(err.recoverable).toBe(false);
      onlyTheAgentAsked();
    } finally {
      registry.chunked = false;
    }
  }, 60_000);

  it("refuses a config past the bound before fetching it, and a layer with URLs of its own (dockerd would fetch those itself)", async () => {
    const config = { digest: `sha256:${'c'.repeat(64)}`, size: 64 * 1024 * 1024 };
    registry.manifests.set('tenant/bigconfig:1', manifestOf(config, [{ digest: digestOf(layer.blob), size: layer.blob.length }]));
    const big = await rejection(runtime.startTask(task(`${registry.address}/tenant/bigconfig:1`)));
    expect(big.message).toMatch(/refused: its image config is 67108864 bytes, more than the 8388608 this node reads$/);
    expect(registry.log.some((line) => line.includes(config.digest))).toBe(false);

    const foreign = JSON.parse(manifestOf({ digest: digestOf('{}'), size: 2 }, [{ digest: digestOf(layer.blob), size: layer.blob.length }]).toString()) as { layers: Array<Record<string, unknown>> };
    foreign.layers[0]!.urls = [`${canary.url}/layer`];
    registry.manifests.set('tenant/foreign:1', Buffer.from(JSON.stringify(foreign)));
    const refused = await rejection(runtime.startTask(task(`${registry.address}/tenant/foreign:1`)));
    expect(refused.message).toMatch(/refused: its manifest's layer 1 names URLs to fetch it from \(a foreign layer\)/);
    expect(canary.hits).toEqual([]);
  }, 60_000);

  it("follows no redirect of a blob, and no token realm, to the host's loopback: the tenant reads the node's refusal", async () => {
    // A layer new to the node.
    const fresh = await layerOf(`#!/bin/sh\necho redirected ${process.pid}\n`);
    putImage(registry, 'tenant/redirected:1', { config: { Cmd: ['/hello'] } }, fresh);
    registry.redirects.set(digestOf(fresh.blob), `${canary.url}/blob`);
    // The layer every test here uses, already on the node, which the agent fetches all the same (another repository brought it).
    putImage(registry, 'tenant/redirected:2', { config: { Cmd: ['/hello'], Labels: { known: 'layer' } } }, layer);
    registry.redirects.set(digestOf(layer.blob), `${canary.url}/blob`);
    try {
      const err = await rejection(runtime.startTask(task(`${registry.address}/tenant/redirected:1`)));
      expect(err.code).toBe('pull_failed');
      expect(err.message).toBe(`pull of ${registry.address}/tenant/redirected:1 failed: ${REFUSED('127.0.0.1')}`);
      expect(err.recoverable).toBe(false);
      const known = await rejection(runtime.startTask(task(`${registry.address}/tenant/redirected:2`)));
      expect(known.message).toBe(`pull of ${registry.address}/tenant/redirected:2 failed: ${REFUSED('127.0.0.1')}`);
      expect(known.recoverable).toBe(false);
    } finally {
      registry.redirects.clear();
    }

    registry.bearerRealm = `${canary.url}/token`;
    try {
      const err = await rejection(runtime.startTask(task(`${registry.address}/tenant/redirected:1`)));
      expect(err.message).toBe(`pull of ${registry.address}/tenant/redirected:1 failed: ${REFUSED('127.0.0.1')}`);
      // A name the node cannot resolve reads the same: which names the node's resolver knows is not told.
      registry.bearerRealm = 'http://no-such-name.invalid/token';
      const unknown = await rejection(runtime.startTask(task(`${registry.address}/tenant/redirected:1`)));
      expect(unknown.message).toBe(`pull of ${registry.address}/tenant/redirected:1 failed: ${REFUSED('no-such-name.invalid')}`);
    } finally {
      registry.bearerRealm = undefined;
    }
    expect(canary.hits).toEqual([]);
    onlyTheAgentAsked();
  }, 60_000);

  it('gives up fetching a blob, one the node already has too, when the registry trickles it, by the stall rule of a pull', async () => {
    putImage(registry, 'tenant/known:1', { config: { Cmd: ['/hello'], Labels: { trickled: 'no' } } }, layer);
    await start(`${registry.address}/tenant/known:1`);
    // Another repository names the same layer, which the agent fetches to check; its registry sends a byte a second.
    putImage(registry, 'mirror/trickle:1', { config: { Cmd: ['/hello'], Labels: { trickled: 'yes' } } }, layer);
    registry.slowBlobs.add(digestOf(layer.blob));
    const impatient = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed }, pullDeadline: { stallMs: 2_000, timeoutMs: 600_000 } });
    try {
      const err = await rejection(impatient.startTask(task(`${registry.address}/mirror/trickle:1`)));
      expect(err.message).toBe(`pull of ${registry.address}/mirror/trickle:1 stopped: it moved less than 1 MiB in 2 s (the registry stopped sending)`);
      expect(err.recoverable).toBe(false);
    } finally {
      registry.slowBlobs.clear();
    }
  }, 60_000);

  it("does not hold another tenant's pull of the same layer while its own registry trickles it (dockerd shares a layer's download among pulls)", async () => {
    // A popular layer (a base image's): tenant A's registry trickles it, tenant B's serves it.
    const popular = await layerOf(`#!/bin/sh\necho popular ${process.pid}\n`);
    const trickling = await startTenantRegistry();
    allowed.push(trickling.address);
    const patient = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed }, pullDeadline: { stallMs: 20_000, timeoutMs: 600_000 } });
    try {
      putImage(trickling, 'tenant-a/slow:1', { config: { Cmd: ['/hello'] } }, popular);
      trickling.slowBlobs.add(digestOf(popular.blob));
      let settled = false;
      const first = refusalOf(patient.startTask(task(`${trickling.address}/tenant-a/slow:1`))).finally(() => (settled = true));
      await vi.waitFor(() => expect(trickling.log).toContain(`GET /v2/tenant-a/slow/blobs/${digestOf(popular.blob)}`), { timeout: 20_000, interval: 50 });
      putImage(registry, 'tenant-b/fast:1', { config: { Cmd: ['/hello'], Labels: { tenant: 'b' } } }, popular);
      const handle = await start(`${registry.address}/tenant-b/fast:1`);
      expect(handle.containerId).toBeTruthy();
      // B ran while A's registry was still sending its first bytes.
      expect(settled).toBe(false);
      await trickling.close();
      expect((await first).code).toBe('pull_failed');
    } finally {
      allowed.pop();
      await trickling.close();
    }
  }, 60_000);

  it("does not fail another tenant's pull that joined dockerd's queued download of a shared layer when the first pull is called off", async () => {
    const shared = await layerOf(`#!/bin/sh\necho shared ${process.pid}\n`);
    const other = await startTenantRegistry();
    allowed.push(other.address);
    putImage(registry, 'tenant-a/app:1', { config: { Cmd: ['/hello'], Labels: { who: 'a' } } }, shared);
    putImage(other, 'tenant-b/app:1', { config: { Cmd: ['/hello'], Labels: { who: 'b' } } }, shared);
    // dockerd's three download slots, held by pulls that do not end until their registry closes.
    const stalls = await Promise.all([50, 51, 52].map((mib) => startStallingRegistry(mib * 1024 * 1024)));
    const streams = (await Promise.all(stalls.map((s) => docker.pull(s.image)))) as Array<NodeJS.ReadableStream & { destroy(): void }>;
    for (const s of streams) s.resume();
    try {
      await expect.poll(() => stalls.reduce((n, s) => n + s.openDownloads(), 0), { timeout: 20_000 }).toBe(3);
      const queued = (statuses: string[]) => statuses.some((s) => /Waiting|Pulling fs layer/.test(s));
      const statusA: string[] = [];
      const statusB: string[] = [];
      const callOffA = new AbortController();
      const startA = runtime.startTask(task(`${registry.address}/tenant-a/app:1`), (p) => statusA.push(p.status), callOffA.signal);
      startA.catch(() => undefined);
      await expect.poll(() => queued(statusA), { timeout: 30_000 }).toBe(true);
      // B's download of the shared layer joins A's, queued behind the three.
      const startB = runtime.startTask(task(`${other.address}/tenant-b/app:1`), (p) => statusB.push(p.status));
      startB.catch(() => undefined);
      await expect.poll(() => queued(statusB), { timeout: 30_000 }).toBe(true);
      callOffA.abort();
      await expect(startA).rejects.toMatchObject({ code: 'start_cancelled' });
      for (const s of streams) s.destroy();
      await Promise.all(stalls.map((s) => s.close()));
      const handle = await startB;
      started.push(handle.containerId);
    } finally {
      for (const s of streams) s.destroy();
      await Promise.all(stalls.map((s) => s.close()));
      allowed.pop();
      await other.close();
      for (const image of await docker.listImages({ filters: { reference: [`${other.address}/*/*`] } })) await docker.getImage(image.Id).remove({ force: true }).catch(() => undefined);
    }
  }, 120_000);

  it('pulls an image that lists one layer twice (two build steps that left the same layer)', async () => {
    const twice = await layerOf(`#!/bin/sh\necho twice ${process.pid}\n`);
    const layers = [layer, twice, twice];
    const config = Buffer.from(JSON.stringify({ architecture: nodePlatform().architecture, os: 'linux', config: { Cmd: ['/hello'] }, rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) } }));
    registry.blobs.set(digestOf(config), config);
    for (const l of layers) registry.blobs.set(digestOf(l.blob), l.blob);
    registry.manifests.set('tenant/twice-listed:1', manifestOf({ digest: digestOf(config), size: config.length }, layers.map((l) => ({ digest: digestOf(l.blob), size: l.blob.length }))));
    const before = registry.log.length;
    await start(`${registry.address}/tenant/twice-listed:1`);
    expect(registry.log.slice(before).filter((line) => line === `GET /v2/tenant/twice-listed/blobs/${digestOf(twice.blob)}`)).toHaveLength(1);
  }, 60_000);

  it("runs an image again after it was removed from the node: the blobs its repository proved before that dockerd no longer has are fetched before dockerd is asked, so it pulls once", async () => {
    const fresh = await layerOf(`#!/bin/sh\necho removed ${process.pid}\n`);
    putImage(registry, 'tenant/removed:1', { config: { Cmd: ['/hello'], Labels: { removed: 'yes' } } }, fresh);
    const image = `${registry.address}/tenant/removed:1`;
    const first = await runtime.startTask(task(image));
    await runtime.destroyTask(first.containerId, { force: true });
    await docker.getImage((await docker.getImage(image).inspect()).Id).remove({ force: true });
    const before = registry.log.length;
    const statuses: string[] = [];
    const handle = await runtime.startTask(task(image), (progress) => statuses.push(progress.status));
    started.push(handle.containerId);
    expect(registry.log.slice(before)).toContain(`GET /v2/tenant/removed/blobs/${digestOf(fresh.blob)}`);
    // dockerd was asked once: a blob it asked for and the front had not staged would have
    // failed that pull (and every other pull that joined its download of the blob).
    expect(statuses.filter((status) => status === `Pulling ${image}`)).toHaveLength(1);
    onlyTheAgentAsked();
  }, 60_000);

  it("reaches a registry at its next address when its first does not answer", async () => {
    putImage(registry, 'tenant/twice:1', { config: { Cmd: ['/hello'] } }, layer);
    const port = registry.address.split(':')[1];
    // Nothing listens on 127.0.0.2: the name's first address refuses, its second is the registry.
    const resolve = async (host: string) => (host === 'two.test' ? ['127.0.0.2', '127.0.0.1'] : []);
    const twoAddresses = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed: [...allowed, `two.test:${port}`], resolve } });
    const handle = await twoAddresses.startTask(task(`two.test:${port}/tenant/twice:1`));
    await twoAddresses.destroyTask(handle.containerId, { force: true });
    await docker.getImage(`two.test:${port}/tenant/twice:1`).remove();
    expect(registry.log).toContain('GET /v2/tenant/twice/manifests/1');
  }, 60_000);

  it('follows a registry that redirects its API (as registry.k8s.io does), each hop checked', async () => {
    putImage(registry, 'tenant/moved:1', { config: { Cmd: ['/hello'] } }, layer);
    const redirector = createServer((req, res) => res.writeHead(307, { location: `http://${registry.address}${req.url}` }).end());
    await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
    const front = `127.0.0.1:${(redirector.address() as AddressInfo).port}`;
    allowed.push(front);
    try {
      await start(`${front}/tenant/moved:1`);
      expect(registry.log).toContain('GET /v2/tenant/moved/manifests/1');
    } finally {
      allowed.pop();
      await new Promise<void>((resolve) => redirector.close(() => resolve()));
    }
  }, 60_000);

  it("fetches an anonymous token from the realm the registry names, and uses it for the manifest and every blob", async () => {
    putImage(registry, 'tenant/tokened:1', { config: { Cmd: ['/hello'] } }, layer);
    registry.bearerRealm = `http://${registry.address}/token`;
    const before = registry.log.length;
    try {
      await start(`${registry.address}/tenant/tokened:1`);
    } finally {
      registry.bearerRealm = undefined;
    }
    const asked = registry.log.slice(before);
    expect(asked).toContain('GET /token?service=tenant&scope=repository%3Atenant%2Ftokened%3Apull');
    expect(asked.filter((line) => line.includes('/blobs/')).length).toBeGreaterThanOrEqual(2);
  }, 60_000);
});
