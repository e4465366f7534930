// What a process crashing in a container costs the host, with the host's core pattern
// handing dumps to a program (as systemd-coredump and apport set it) and after the agent's
// kernel settings: on the real kernel, with a real container. The host's pattern is put
// back afterwards. Another suite's agent starting meanwhile also sets `core`, so the first
// half checks the pattern it counted under is still the test's own.
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unframeDockerLog } from '../../../test/support/docker-io.js';
import { BUSYBOX_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { ensureBusybox } from '../runtime/docker-test-images.js';
import { applyKernelSettings, CONTAINED_CORE_PATTERN, CORE_PATTERN } from './kernel-settings.js';

const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'core-dumps-'));
const handler = join(dir, 'handler.sh');
const calls = join(dir, 'calls');
const PIPED = `|${handler} %P`;
const CRASHES = 20;
const hostPattern = readFileSync(CORE_PATTERN.path, 'utf8').trim();

/** Times the kernel started the handler on the host (one byte each). */
const handlerRuns = (): number => readFileSync(calls).length;

/** Runs `script` in a fresh busybox container to its end; what it printed. */
async function runInContainer(script: string): Promise<string> {
  const container = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['sh', '-c', script], Labels: { 'svc.test': 'core-dumps' }, HostConfig: { NanoCpus: 500_000_000 } });
  try {
    await container.start();
    await container.wait();
    return unframeDockerLog(await container.logs({ stdout: true, stderr: true }));
  } finally {
    await container.remove({ force: true });
  }
}

const crashLoop = `for i in $(seq ${CRASHES}); do sh -c 'kill -SEGV $$'; done; echo crashed`;

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  // What systemd-coredump does first: take the whole dump from the kernel.
  writeFileSync(handler, `#!/bin/sh\nprintf x >> ${calls}\ncat > /dev/null\n`);
  chmodSync(handler, 0o755);
  writeFileSync(calls, '');
});

afterAll(() => {
  writeFileSync(CORE_PATTERN.path, hostPattern);
  rmSync(dir, { recursive: true, force: true });
});

describe('a process crashing in a container', () => {
  it("starts the host's dump handler for every crash, outside the container, until the agent keeps dumps in the container", async () => {
    // Under the piped pattern: the kernel starts the handler on the host for each crash.
    let counted = false;
    for (let attempt = 0; attempt < 3 && !counted; attempt++) {
      writeFileSync(CORE_PATTERN.path, PIPED);
      const before = handlerRuns();
      expect(await runInContainer(crashLoop)).toContain('crashed');
      // The kernel does not wait for the handler (core_pipe_limit 0): give the last ones time.
      await new Promise((r) => setTimeout(r, 500));
      counted = readFileSync(CORE_PATTERN.path, 'utf8').trim() === PIPED;
      if (counted) expect(handlerRuns() - before).toBeGreaterThan(0);
    }
    expect(counted).toBe(true);

    // The agent's settings at start.
    const [outcome] = await applyKernelSettings([CORE_PATTERN]);
    expect(outcome).toMatchObject({ changed: true, from: PIPED, to: CONTAINED_CORE_PATTERN });
    expect(readFileSync(CORE_PATTERN.path, 'utf8').trim()).toBe(CONTAINED_CORE_PATTERN);

    // Now the crashing process writes its own dump, in its container, and nothing starts on
    // the host (even with dumps turned on as far as the container may).
    const before = handlerRuns();
    const out = await runInContainer(`cd /tmp && ulimit -c unlimited && ${crashLoop} && ls /tmp`);
    await new Promise((r) => setTimeout(r, 500));
    expect(out).toContain('crashed');
    expect(out).toMatch(/^core(\.\d+)?$/m);
    expect(handlerRuns() - before).toBe(0);
  });
});
