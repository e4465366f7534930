// Smoke test of the host setup (scripts/setup-host.sh): a real Docker engine,
// the loopback registry and the busybox test image, driven through dockerode
// the way the node agent drives it.
import { describe, it, expect, beforeAll } from 'vitest';
import Docker from 'dockerode';
import { BUSYBOX_IMAGE, dockerAvailable } from './support/images.js';

const docker = new Docker();

function statusCode(err: unknown): number | undefined {
  return (err as { statusCode?: number } | null)?.statusCode;
}

async function pull(image: string): Promise<unknown[]> {
  const stream = await docker.pull(image);
  return new Promise((resolve, reject) => {
    docker.modem.followProgress(stream, (err, events) => (err ? reject(err) : resolve(events)));
  });
}

describe('docker smoke', () => {
  beforeAll(async () => {
    // Fail loudly: a suite that silently skips without Docker hides regressions.
    if (!(await dockerAvailable(docker))) {
      throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
    }
  });

  it('pulls the test image from the loopback registry and runs a container', { timeout: 120_000 }, async () => {
    // Remove the local copy so the pull really goes through the registry.
    try {
      await docker.getImage(BUSYBOX_IMAGE).remove({ force: true });
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
    }

    const events = await pull(BUSYBOX_IMAGE);
    expect(events.length).toBeGreaterThan(0);
    expect(JSON.stringify(events)).toMatch(/Downloaded newer image|Pull complete/);

    const container = await docker.createContainer({
      Image: BUSYBOX_IMAGE,
      Cmd: ['sh', '-c', 'echo hello-from-container; exit 7'],
      Tty: false,
    });
    try {
      await container.start();
      const { StatusCode } = await container.wait();
      expect(StatusCode).toBe(7);

      // Without a TTY the log stream is multiplexed (8-byte frame headers);
      // a substring match is enough for this check.
      const logs = await container.logs({ stdout: true, stderr: true, follow: false });
      expect(logs.toString('utf8')).toContain('hello-from-container');
    } finally {
      await container.remove({ force: true });
    }
  });
});
