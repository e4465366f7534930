// Test support (not shipped code): images that exist in the loopback registry but not in
// the local engine, so a test sees a real pull without removing the shared busybox image
// other suites may be using at the same moment.
import type Docker from 'dockerode';
import { BUSYBOX_IMAGE, REGISTRY } from '../../../test/support/images.js';

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
