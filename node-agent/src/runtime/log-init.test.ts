// The log limiter (log_init.c, built by log-init.ts) in front of instances that
// DockerRuntime starts on the real engine: what reaches the Docker log, what the command
// sees of signals and exits, and what a tenant can do to get around it.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execIn, unframeDockerLog, waitForLog } from '../../../test/support/docker-io.js';
import { BUSYBOX_IMAGE, MODEL_SERVER_STANDIN_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { LABEL_NODE, type TaskSpec } from './container-spec.js';
import { DockerRuntime } from './docker-runtime.js';
import { ensureBusybox } from './docker-test-images.js';
import { buildLogInit } from './log-init.js';

const docker = new Docker();
const run = randomBytes(4).toString('hex');
const nodeId = `test-log-${run}`;
const BYTES_PER_SECOND = 64 * 1024;
const LINES_PER_SECOND = 200;
let dir: string;
let runtime: DockerRuntime;
let logInitPath: string;

let seq = 0;
const task = (command: string[], overrides: Partial<TaskSpec> = {}): TaskSpec => ({
  taskId: `l${run}-${++seq}`,
  kind: 'instance',
  image: BUSYBOX_IMAGE,
  gpuUuids: [],
  command,
  ...overrides,
});

/** The container's Docker log, one stream at a time (the engine frames each chunk with an 8-byte header). */
async function logOf(containerId: string, stream: 'stdout' | 'stderr'): Promise<string> {
  return unframeDockerLog(await docker.getContainer(containerId).logs({ stdout: stream === 'stdout', stderr: stream === 'stderr' }));
}


const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  dir = await mkdtemp(join(tmpdir(), 'svc-log-init-'));
  const path = await buildLogInit(dir);
  logInitPath = path;
  runtime = new DockerRuntime({ docker, nodeId, logLimit: { path, bytesPerSecond: BYTES_PER_SECOND, linesPerSecond: LINES_PER_SECOND } });
});

afterAll(async () => {
  const leftovers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_NODE}=${nodeId}`] } });
  await Promise.all(leftovers.map((c) => docker.getContainer(c.Id).remove({ force: true })));
  const networks = await docker.listNetworks({ filters: { label: [`${LABEL_NODE}=${nodeId}`] } });
  await Promise.all(networks.map((n) => docker.getNetwork(n.Id).remove()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the log limiter', () => {
  it('holds an instance printing without pause to the set lines and bytes a second', async () => {
    const long = 'x'.repeat(999);
    const shortLines = await runtime.startTask(task(['yes']));
    const longLines = await runtime.startTask(task(['yes', long]));
    const started = Date.now();
    await sleep(3_000);
    const [short, wide] = [await logOf(shortLines.containerId, 'stdout'), await logOf(longLines.containerId, 'stdout')];
    const seconds = (Date.now() - started) / 1000 + 1; // the start's second of burst
    // One read is taken whole, then paid off: a twentieth of a second's bytes (64 KiB / 20), in lines of "y\n".
    const oneRead = Math.ceil(BYTES_PER_SECOND / 20);
    const lines = short.split('\n').length - 1;
    expect(lines).toBeGreaterThan(LINES_PER_SECOND);
    expect(lines).toBeLessThanOrEqual(LINES_PER_SECOND * seconds + oneRead / 2);
    expect(wide.length).toBeGreaterThan(BYTES_PER_SECOND);
    expect(wide.length).toBeLessThanOrEqual(BYTES_PER_SECOND * seconds + oneRead);
    expect(wide.split('\n').slice(0, -1).every((line) => line === long)).toBe(true);
    for (const h of [shortLines, longLines]) expect((await runtime.inspectTask(h.containerId)).state).toBe('running');
    for (const h of [shortLines, longLines]) await runtime.destroyTask(h.containerId, { force: true });
  }, 30_000);

  it('passes on every line, in order and by stream, the last ones too, and exits with the command\'s status', async () => {
    // 3,000 lines at once: far past a second's 200, so most wait in the pipe when the command exits.
    const h = await runtime.startTask(task(['sh', '-c', 'echo first; echo oops >&2; seq 1 3000; echo last words >&2; exit 3']));
    expect((await runtime.waitTask(h.containerId)).exitCode).toBe(3);
    const out = await logOf(h.containerId, 'stdout');
    expect(out).toBe(['first', ...Array.from({ length: 3000 }, (_, i) => String(i + 1))].join('\n') + '\n');
    expect(await logOf(h.containerId, 'stderr')).toBe('oops\nlast words\n');
    await runtime.destroyTask(h.containerId, { force: true });
  }, 30_000);

  it("runs the image's own ENTRYPOINT with the order's command as its arguments", async () => {
    const h = await runtime.startTask(task(['--port', '9'], { image: MODEL_SERVER_STANDIN_IMAGE }));
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(50)) {
      if ((await execIn(docker, h.containerId, ['cat', '/www/args'])).trim() === '--port 9') break;
    }
    expect((await execIn(docker, h.containerId, ['cat', '/www/args'])).trim()).toBe('--port 9');
    await runtime.destroyTask(h.containerId, { force: true });
  }, 30_000);

  it('forwards the graceful stop: a handler runs, no handler ends the command (143), an ignored SIGTERM waits for SIGKILL', async () => {
    const traps = await runtime.startTask(task(['sh', '-c', 'trap "echo bye; exit 0" TERM; echo ready; while true; do sleep 0.1; done']));
    const plain = await runtime.startTask(task(['sleep', '1000']));
    const ignores = await runtime.startTask(task(['sh', '-c', 'trap "" TERM; echo ready; while true; do sleep 0.1; done']));
    await waitForLog(docker, traps.containerId, 'ready');
    await waitForLog(docker, ignores.containerId, 'ready');

    expect(await runtime.stopTask(traps.containerId, { timeoutMs: 5_000 })).toBe('exited');
    expect((await runtime.inspectTask(traps.containerId)).exitCode).toBe(0);
    expect(await logOf(traps.containerId, 'stdout')).toBe('ready\nbye\n');
    expect(await runtime.stopTask(plain.containerId, { timeoutMs: 5_000 })).toBe('exited');
    expect((await runtime.inspectTask(plain.containerId)).exitCode).toBe(143);
    expect(await runtime.stopTask(ignores.containerId, { timeoutMs: 500 })).toBe('killed');
    for (const h of [traps, plain, ignores]) await runtime.destroyTask(h.containerId, { force: true });
  }, 30_000);

  it("keeps the command from printing around it through the first process's descriptors", async () => {
    const h = await runtime.startTask(task(['sh', '-c', 'yes > /proc/1/fd/1; echo "exit $?"; cat /proc/1/fd/1 < /dev/null; sleep 1000']));
    await waitForLog(docker, h.containerId, 'exit ');
    await sleep(1_000);
    expect(await logOf(h.containerId, 'stdout')).toBe('exit 1\n');
    expect(await logOf(h.containerId, 'stderr')).toMatch(/can't create \/proc\/1\/fd\/1: Permission denied/);
    await runtime.destroyTask(h.containerId, { force: true });
  }, 30_000);

  it('refuses to start a command that is not in the image, before any of it runs, and leaves nothing behind', async () => {
    // Docker refused these starts before the limiter was PID 1: a failed start, not a
    // container that runs, exits 127 and is billed as an instance that ran.
    const cases: [string[], RegExp][] = [
      [['/no/such/program', 'arg'], /^the command "\/no\/such\/program" does not exist in the image$/],
      [['slep', '1000'], /^the command "slep" on the image's PATH \(\/usr\/local\/sbin:.*\/bin\) does not exist in the image$/],
      [['/etc/passwd'], /^the command "\/etc\/passwd" is not an executable file$/],
      [['bin'], /^the command "bin" .* does not exist in the image$/],
    ];
    for (const [command, reason] of cases) {
      const spec = task(command);
      const failure = await runtime.startTask(spec).then(
        () => null,
        (err: unknown) => err,
      );
      expect(failure, command.join(' ')).toMatchObject({ code: 'start_failed', message: expect.stringMatching(reason) });
      expect(await docker.listContainers({ all: true, filters: { name: [spec.taskId] } })).toEqual([]);
    }
    // Found through a symlink (busybox's applets), along PATH, and relative to the working directory (/).
    for (const command of [['sh', '-c', 'exit 0'], ['/bin/true'], ['bin/true']]) {
      const h = await runtime.startTask(task(command));
      expect((await runtime.waitTask(h.containerId)).exitCode, command.join(' ')).toBe(0);
      await runtime.destroyTask(h.containerId, { force: true });
    }
  }, 30_000);

  it('says why when the command cannot be run after all, and exits 127', async () => {
    // What the look-up before the start cannot see (here the limiter run by hand, with no
    // engine to ask) still ends as a plain exit with the reason in the log.
    const outcome = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(logInitPath, ['1000000', '1000', '--', '/no/such/program', 'arg'], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(outcome).toEqual({ code: 127, stderr: 'svc-log-init: cannot run /no/such/program: No such file or directory\n' });
  }, 30_000);
});
