// ContainerProcess.run on the real engine: the helper commands the agent runs in an
// instance are the image's own programs (a tenant's), so what they print and how long they
// take is bounded, and the agent gets its answer either way.
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { ensureBusybox } from '../runtime/docker-test-images.js';
import { ContainerProcess } from './container-process.js';

const docker = new Docker();
let container: Docker.Container;

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  container = await docker.createContainer({
    name: `svc-test-process-${randomBytes(4).toString('hex')}`,
    Image: BUSYBOX_IMAGE,
    Cmd: ['sleep', '1000'],
    Labels: { 'svc.test': 'container-process' },
  });
  await container.start();
});

afterAll(async () => {
  await container?.remove({ force: true });
});

const run = (cmd: string[], options?: Parameters<typeof ContainerProcess.run>[3]) => ContainerProcess.run(docker, container.id, cmd, options);
const processes = async (): Promise<string> => (await container.top({ ps_args: '-eo pid,args' })).Processes.map((p: string[]) => p.join(' ')).join('\n');

describe('ContainerProcess.run', () => {
  it('collects what a helper prints and its exit code', async () => {
    expect(await run(['sh', '-c', 'echo out; echo err >&2; exit 3'])).toEqual({ code: 3, stdout: 'out\n', stderr: 'err\n' });
  });

  it('stops a helper that prints without end at 64 KiB and kills it', async () => {
    // A generous time limit: on a host whose engine is busy with other suites' streams, the
    // first output can take seconds, and what is held here is the output bound.
    const result = await run(['sh', '-c', 'exec yes'], { timeoutMs: 60_000 });
    expect(result.code).toBeNull();
    expect(result.stdout.length).toBe(64 * 1024);
    expect(result.stderr).toBe('sh was stopped: it printed more than 65536 bytes');
    await expect.poll(processes, { timeout: 10_000 }).not.toMatch(/\byes\b/);
  }, 90_000);

  it('stops a helper whose first output fills the bound exactly once it prints one byte more', async () => {
    // The first chunk leaves no room; the byte after it is what overflows (it once went unnoticed,
    // and the helper ran on to its time limit).
    const result = await run(['sh', '-c', 'printf abcd; sleep 1; printf e; exec sleep 999'], { maxOutputBytes: 4, timeoutMs: 60_000 });
    expect(result).toEqual({ code: null, stdout: 'abcd', stderr: 'sh was stopped: it printed more than 4 bytes' });
    await expect.poll(processes, { timeout: 10_000 }).not.toMatch(/sleep 999/);
  }, 90_000);

  it('keeps a helper that prints exactly its bound', async () => {
    expect(await run(['sh', '-c', 'printf abcd'], { maxOutputBytes: 4 })).toEqual({ code: 0, stdout: 'abcd', stderr: '' });
  });

  it('stops a helper that never ends at its time limit and kills it', async () => {
    const started = performance.now();
    const result = await run(['sh', '-c', 'exec sleep 999'], { timeoutMs: 2_000 });
    expect(performance.now() - started).toBeLessThan(20_000);
    expect(result).toEqual({ code: null, stdout: '', stderr: 'sh was stopped: it ran past 2000 ms' });
    await expect.poll(processes, { timeout: 10_000 }).not.toMatch(/sleep 999/);
  }, 30_000);
});
