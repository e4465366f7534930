// Test support (not shipped code): images that exist in the loopback registry but not in
// the local engine, so a test sees a real pull without removing the shared busybox image
// other suites may be using at the same moment.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { Transform, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip, gzipSync } from 'node:zlib';
import type Docker from 'dockerode';
import tar from 'tar-stream';
import { BUSYBOX_IMAGE, REGISTRY } from '../../../test/support/images.js';
import { RuntimeError } from './runtime.js';
import { digestOf } from '../../../test/support/tenant-registry.js';

const follow = (docker: Docker, stream: NodeJS.ReadableStream): Promise<Array<{ error?: string }>> =>
  new Promise((resolve, reject) => {
    docker.modem.followProgress(stream, (err: Error | null, events: Array<{ error?: string }>) => {
      const failed = events.find((e) => e.error);
      if (err || failed) reject(err ?? new Error(failed?.error));
      else resolve(events);
    });
  });

export async function ensureBusybox(docker: Docker): Promise<void> {
  try {
    await docker.getImage(BUSYBOX_IMAGE).inspect();
  } catch {
    await follow(docker, await docker.pull(BUSYBOX_IMAGE));
  }
}

/** The docker smoke suite removes the busybox image while others run: pull and retry once. */
async function createFromBusybox(docker: Docker, options: Docker.ContainerCreateOptions): Promise<Docker.Container> {
  await ensureBusybox(docker);
  try {
    return await docker.createContainer(options);
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 404) throw err;
    await ensureBusybox(docker);
    return docker.createContainer(options);
  }
}

/**
 * Commits `builder` as `ref` (a repository in the loopback registry) and pushes it, keeping
 * the local copy: the agent runs an instance's present image only when it came from the
 * repository the instance names, as a pushed one did.
 */
export async function commitAndPush(docker: Docker, builder: Docker.Container, ref: string, changes?: string): Promise<string> {
  const [repo, tag] = ref.split(/:(?=[^:/]+$)/) as [string, string];
  await builder.commit({ repo, tag, ...(changes ? { changes } : {}) });
  await follow(docker, await docker.getImage(ref).push({ authconfig: { username: '', password: '', serveraddress: REGISTRY } }));
  return ref;
}

/**
 * Pushes `${REGISTRY}/svc/runtime-test:<tag>`: busybox plus one layer of `payloadBytes`
 * random bytes (incompressible, so the download reports real progress), then removes it
 * locally. Returns the reference.
 */
export async function pushFreshImage(docker: Docker, tag: string, payloadBytes = 2_000_000): Promise<string> {
  const repo = `${REGISTRY}/svc/runtime-test`;
  const ref = `${repo}:${tag}`;
  const builder = await createFromBusybox(docker, {
    Image: BUSYBOX_IMAGE,
    Cmd: ['sh', '-c', `head -c ${payloadBytes} /dev/urandom > /payload`],
    Labels: { 'svc.test': 'image-builder' },
  });
  try {
    await builder.start();
    await builder.wait();
    await builder.commit({ repo, tag });
  } finally {
    await builder.remove({ force: true });
  }
  const image = docker.getImage(ref);
  // The engine wants an auth header even for a registry that needs none.
  await follow(docker, await image.push({ authconfig: { username: '', password: '', serveraddress: REGISTRY } }));
  await image.remove();
  return ref;
}

/**
 * Pushes `${REGISTRY}/svc/runtime-test:<tag>` straight to the registry (nothing is written to
 * the local engine): one layer holding a file of `unpackedBytes` zeros, about a thousandth of
 * that gzipped, as a tenant's image made to fill a node's disk when unpacked would be.
 */
export async function pushZeroLayerImage(tag: string, unpackedBytes: number): Promise<string> {
  const repo = 'svc/runtime-test';
  const pack = tar.pack();
  const zeros = Buffer.alloc(1024 * 1024);
  const writing = (async () => {
    const entry = pack.entry({ name: 'zeros', size: unpackedBytes });
    for (let left = unpackedBytes; left > 0; left -= zeros.length) {
      if (!entry.write(left >= zeros.length ? zeros : zeros.subarray(0, left))) await once(entry, 'drain');
    }
    (entry as unknown as Writable).end(); // streamx's typings demand an argument
    pack.finalize();
  })();
  const diffId = createHash('sha256');
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      diffId.update(chunk);
      done(null, chunk);
    },
  });
  const gzipped: Buffer[] = [];
  await pipeline(pack, tap, createGzip({ level: 9 }), async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) gzipped.push(chunk);
  });
  await writing;
  const layer = Buffer.concat(gzipped);
  const config = Buffer.from(
    JSON.stringify({
      architecture: process.arch === 'arm64' ? 'arm64' : 'amd64',
      os: 'linux',
      config: { Cmd: ['/zeros'] },
      rootfs: { type: 'layers', diff_ids: [`sha256:${diffId.digest('hex')}`] },
    }),
  );
  const blob = async (body: Buffer) => {
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    const started = await fetch(`http://${REGISTRY}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
    const upload = new URL(started.headers.get('location') ?? '', `http://${REGISTRY}`);
    upload.searchParams.set('digest', digest);
    const put = await fetch(upload, { method: 'PUT', headers: { 'Content-Type': 'application/octet-stream' }, body });
    if (put.status !== 201) throw new Error(`registry blob upload: HTTP ${put.status} ${await put.text()}`);
    return { digest, size: body.length };
  };
  const manifest = {
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', ...(await blob(config)) },
    layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', ...(await blob(layer)) }],
  };
  const put = await fetch(`http://${REGISTRY}/v2/${repo}/manifests/${tag}`, {
    method: 'PUT',
    headers: { 'Content-Type': manifest.mediaType },
    body: JSON.stringify(manifest),
  });
  if (put.status !== 201) throw new Error(`registry manifest upload: HTTP ${put.status} ${await put.text()}`);
  return `${REGISTRY}/${repo}:${tag}`;
}

/** Removes the local copy (if any) and the tag in the registry, so test runs leave no trail. */
export async function deleteFreshImage(docker: Docker, ref: string): Promise<void> {
  try {
    await docker.getImage(ref).remove({ force: true });
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 404) throw err;
  }
  const [repoPath, tag] = ref.slice(REGISTRY.length + 1).split(':') as [string, string];
  const manifestUrl = `http://${REGISTRY}/v2/${repoPath}/manifests/`;
  const head = await fetch(manifestUrl + tag, {
    method: 'HEAD',
    headers: { Accept: 'application/vnd.docker.distribution.manifest.v2+json' },
  });
  const digest = head.headers.get('docker-content-digest');
  if (!head.ok || !digest) return;
  const res = await fetch(manifestUrl + digest, { method: 'DELETE' });
  if (!res.ok && res.status !== 404) throw new Error(`registry delete of ${ref}: HTTP ${res.status}`);
}

/** The RuntimeError a start was refused with; throws when it was not refused, or not so. */
export async function refusalOf(start: Promise<unknown>): Promise<RuntimeError> {
  try {
    await start;
  } catch (err) {
    if (err instanceof RuntimeError) return err;
    throw err;
  }
  throw new Error('expected the start to be refused');
}

/** A gzipped layer holding an executable `/hello` with `script`, and its uncompressed digest. */
export async function layerOf(script: string): Promise<{ blob: Buffer; diffId: string }> {
  const pack = tar.pack();
  pack.entry({ name: 'hello', mode: 0o755 }, script);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
  const tarball = Buffer.concat(chunks);
  return { blob: gzipSync(tarball), diffId: digestOf(tarball) };
}
