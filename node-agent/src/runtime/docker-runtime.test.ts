// DockerRuntime against the real engine and the loopback registry (scripts/setup-host.sh).
// Every container carries a node id unique to this run, and afterAll removes them all.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { execIn, waitForLog } from '../../../test/support/docker-io.js';
import { buildStaticProgram } from '../../../test/support/static-program.js';
import { ContainerProcess } from '../access/container-process.js';
import { BUSYBOX_IMAGE, dockerAvailable, REGISTRY } from '../../../test/support/images.js';
import { startStallingRegistry } from '../../../test/support/stalling-registry.js';
import { LABEL_INSTANCE, LABEL_NODE, SHARED_DEVICES_OFF, buildContainerSpec, containerName, type HostCapabilities, type TaskSpec } from './container-spec.js';
import { DockerRuntime } from './docker-runtime.js';
import { ReplicaPullWindow } from './image-registry.js';
import { DiskPressureWatch } from '../host-facts/disk-pressure.js';
import { dockerRootDir, fileSystemUsage } from './disk-usage.js';
import { commitAndPush, deleteFreshImage, ensureBusybox, pushFreshImage, pushZeroLayerImage } from './docker-test-images.js';
import { RuntimeError, type PullProgress } from './runtime.js';
import { DEFAULT_LIMIT_SETTINGS, GIB, MIB } from './task-limits.js';
import { diskUnder } from '../host-facts/block-device.js';
import { buildNetworkSpec, networkName } from './task-network.js';
import { devptsMountPoints } from './task-pts.js';

const docker = new Docker();
const run = randomBytes(4).toString('hex');
const nodeId = `test-node-${run}`;
const otherNodeId = `test-other-${run}`;
const freshImages: string[] = [];

let seq = 0;
const task = (overrides: Partial<TaskSpec> = {}): TaskSpec => ({
  taskId: `t${run}-${++seq}`,
  kind: 'instance',
  image: BUSYBOX_IMAGE,
  gpuUuids: [],
  command: ['sh', '-c', 'while true; do sleep 0.1; done'],
  ...overrides,
});
// sh is PID 1, which the kernel shields from signals it has no handler for; the trap
// must be installed before the signal goes out, hence "ready" and waitForLog.
const TRAPS_TERM = ['sh', '-c', 'trap "echo bye; exit 0" TERM; echo ready; while true; do sleep 0.1; done'];
const IGNORES_TERM = ['sh', '-c', 'trap "" TERM; echo ready; while true; do sleep 0.1; done'];

async function rejection(promise: Promise<unknown>): Promise<RuntimeError> {
  const err = await promise.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RuntimeError);
  return err as RuntimeError;
}

const timed = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
  const t0 = Date.now();
  const value = await fn();
  return [value, Date.now() - t0];
};

const runtime = new DockerRuntime({ docker, nodeId });
const hostCaps: HostCapabilities = { nodeId, nvidiaRuntime: false, capacity: { cpus: 2, memoryBytes: 4 * GIB }, limits: DEFAULT_LIMIT_SETTINGS };

/** A container made behind the runtime's back, as a crash half-way through a start leaves one: network first. */
async function createBehindTheRuntime(spec: TaskSpec): Promise<Docker.Container> {
  await docker.createNetwork(buildNetworkSpec(spec, nodeId, 'internet'));
  return docker.createContainer(buildContainerSpec(spec, hostCaps));
}

/** `tty` run with a terminal (as `docker exec -t` and the SSH gateway's sessions do): the terminal's name. */
async function ttyIn(containerId: string): Promise<string> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: ['tty'], AttachStdout: true, AttachStderr: true, Tty: true });
  const stream = await exec.start({ Tty: true });
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  await new Promise((r) => stream.on('end', r));
  const inspected = await exec.inspect();
  const out = Buffer.concat(chunks).toString('utf8').trim();
  if (inspected.ExitCode !== 0) throw new Error(`tty exited ${inspected.ExitCode}: ${out}`);
  return out;
}

beforeAll(async () => {
  // Fail loudly: a suite that silently skips without Docker hides regressions.
  if (!(await dockerAvailable(docker))) {
    throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  }
  await ensureBusybox(docker);
});

/**
 * Every test's containers and networks go when it ends: each task has a network of its
 * own, and the engine's default address pools hold about 30, shared with the other file
 * running beside this one.
 */
async function removeLeftovers(): Promise<void> {
  for (const node of [nodeId, otherNodeId]) {
    const leftovers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_NODE}=${node}`] } });
    await Promise.all(leftovers.map((c) => docker.getContainer(c.Id).remove({ force: true })));
    const networks = await docker.listNetworks({ filters: { label: [`${LABEL_NODE}=${node}`] } });
    await Promise.all(networks.map((n) => docker.getNetwork(n.Id).remove()));
  }
}

afterEach(removeLeftovers);

afterAll(async () => {
  await removeLeftovers();
  for (const ref of freshImages) await deleteFreshImage(docker, ref);
});

describe('DockerRuntime: pulls', () => {
  it('pulls a missing image from the registry, reporting progress up to 1, then runs it', async () => {
    const image = await pushFreshImage(docker, `progress-${run}`);
    freshImages.push(image);
    const seen: PullProgress[] = [];

    const handle = await runtime.startTask(task({ image }), (p) => seen.push(p));

    expect(handle.state).toBe('running');
    const fractions = seen.map((p) => p.fraction);
    expect(fractions.some((f) => f > 0 && f < 1)).toBe(true);
    expect(fractions.every((f, i) => i === 0 || f >= fractions[i - 1]!)).toBe(true);
    expect(seen.at(-1)).toMatchObject({ image, fraction: 1, status: expect.stringMatching(/Downloaded newer image/) });
    expect(seen.map((p) => p.status).join('\n')).toMatch(/Downloading|Extracting/);
    expect(runtime.pulls.inFlightImages).toEqual([]);

    // Present now: an instance's start still asks the registry (a present copy proves
    // nothing about what the instance may have), which answers that it is up to date.
    const again: PullProgress[] = [];
    const pull = vi.spyOn(docker, 'pull');
    try {
      await runtime.startTask(task({ image }), (p) => again.push(p));
      expect(pull).toHaveBeenCalledTimes(1);
    } finally {
      pull.mockRestore();
    }
    expect(again.at(-1)).toMatchObject({ image, fraction: 1, status: expect.stringMatching(/Image is up to date/) });
  });

  it('refuses an instance image whose layers add up to more than the largest image the node takes before fetching any, and stops such a pull of a replica', async () => {
    const image = await pushFreshImage(docker, `large-${run}`, 3_000_000);
    freshImages.push(image);
    const capped = new DockerRuntime({ docker, nodeId, maxImageBytes: 1024 * 1024 });
    const pull = vi.spyOn(docker, 'pull');
    const err = await rejection(capped.startTask(task({ image })));
    // The manifest says how large the layers are: dockerd is never asked.
    expect(pull).not.toHaveBeenCalled();
    pull.mockRestore();
    expect(err.code).toBe('pull_failed');
    expect(err.message).toBe(`pull of ${image} refused: its layers are more than 1.0 MiB compressed, the largest image this node pulls`);
    expect(err.recoverable).toBe(false);
    // A replica's image dockerd pulls itself: stopped as its progress passes the cap.
    const stopped = await rejection(capped.startTask(task({ image, kind: 'replica' })));
    expect(stopped.message).toBe(`pull of ${image} stopped: its layers are more than 1.0 MiB compressed, the largest image this node pulls`);
    expect(stopped.recoverable).toBe(false);
    await expect(docker.getImage(image).inspect()).rejects.toMatchObject({ statusCode: 404 });
    // The same image within the limit: pulled and run, so the refusal was its size.
    const roomy = new DockerRuntime({ docker, nodeId, maxImageBytes: 10 * 1024 * 1024 });
    expect((await roomy.startTask(task({ image }))).state).toBe('running');
  });

  it('stops a pull whose layer unpacks until the disk holding Docker data is nearly full, and the engine removes what it unpacked', async () => {
    // 2 GiB of zeros, a few MiB on the wire: within any compressed cap. The node's pressure
    // line is put 256 MiB above what the disk holds now, so this host's disk is not filled.
    const image = await pushZeroLayerImage(`zeros-${run}`, 2 * GIB);
    freshImages.push(image);
    const root = await dockerRootDir(docker);
    const before = await fileSystemUsage(root);
    const watch = new DiskPressureWatch(async () => root, ((before.usedBytes + 256 * MIB) / before.sizeBytes) * 100, 60_000, { warn: () => undefined, info: () => undefined });
    let atStop = 0;
    const guarded = new DockerRuntime({
      docker,
      nodeId,
      diskFull: async () => {
        const why = await watch.pullRefusal();
        if (why) atStop = (await watch.current())!.usedBytes;
        return why;
      },
    });
    const err = await rejection(guarded.startTask(task({ image })));
    expect(err.code).toBe('pull_failed');
    expect(err.message).toMatch(/^pull of \S+ stopped: this node's disk is nearly full \(\d+% of its bytes and \d+% of its files in use, past [\d.]+%\)$/);
    expect(err.recoverable).toBe(false);
    await expect(docker.getImage(image).inspect()).rejects.toMatchObject({ statusCode: 404 });
    // What the layer had unpacked (256 MiB at least, to reach the line) is removed again.
    expect(atStop).toBeGreaterThan(before.usedBytes + 256 * MIB);
    await expect.poll(async () => (await fileSystemUsage(root)).usedBytes, { timeout: 30_000 }).toBeLessThan(atStop - 128 * MIB);
  }, 120_000);

  it('gives up a pull from a registry that stops sending, or that takes too long, so the instance fails instead of holding its GPUs', async () => {
    const registry = await startStallingRegistry();
    try {
      const stalls = new DockerRuntime({ docker, nodeId, pullDeadline: { stallMs: 2_000, timeoutMs: 60_000 } });
      const [err, ms] = await timed(() => rejection(stalls.startTask(task({ image: registry.image }))));
      expect(err.code).toBe('pull_failed');
      expect(err.message).toBe(`pull of ${registry.image} stopped: it moved less than 1 MiB in 2 s (the registry stopped sending)`);
      expect(err.recoverable).toBe(false);
      expect(ms).toBeLessThan(30_000);
      // Docker cannot cancel a stalled download, but the agent fetches it for dockerd
      // (registry-front.ts): the download from the tenant's registry ends with the pull.
      await expect.poll(() => registry.openDownloads(), { timeout: 10_000 }).toBe(0);
      // Bounded the same way by the whole time.
      const slow = new DockerRuntime({ docker, nodeId, pullDeadline: { stallMs: 600_000, timeoutMs: 3_000 } });
      const late = await rejection(slow.startTask(task({ image: registry.image })));
      expect(late.message).toBe(`pull of ${registry.image} stopped: it took longer than 3 s`);
      await expect.poll(() => registry.openDownloads(), { timeout: 10_000 }).toBe(0);
      await expect(docker.getImage(registry.image).inspect()).rejects.toMatchObject({ statusCode: 404 });
    } finally {
      await registry.close();
    }
  }, 60_000);

  it('makes no container for a start called off as its pull ends (its task was stopped meanwhile), and leaves nothing behind', async () => {
    const calledOff = new AbortController();
    const spec = task();
    const err = await rejection(
      runtime.startTask(spec, (p) => {
        if (p.fraction === 1) calledOff.abort();
      }, calledOff.signal),
    );
    expect(err.code).toBe('start_cancelled');
    expect(await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTANCE}=${spec.taskId}`, `${LABEL_NODE}=${nodeId}`] } })).toEqual([]);
    expect(await docker.listNetworks({ filters: { name: [networkName(spec)] } })).toEqual([]);
  });

  it('shares one pull between concurrent starts of the same image', async () => {
    const image = await pushFreshImage(docker, `shared-${run}`);
    freshImages.push(image);
    const pull = vi.spyOn(docker, 'pull');
    const startedBefore = runtime.pulls.pullsStarted;
    const seenA: PullProgress[] = [];
    const seenB: PullProgress[] = [];

    const [a, b] = await Promise.all([
      runtime.startTask(task({ image }), (p) => seenA.push(p)),
      runtime.startTask(task({ image }), (p) => seenB.push(p)),
    ]);

    expect(pull).toHaveBeenCalledTimes(1);
    pull.mockRestore();
    expect(runtime.pulls.pullsStarted - startedBefore).toBe(1);
    expect([a.state, b.state]).toEqual(['running', 'running']);
    expect(a.containerId).not.toBe(b.containerId);
    expect(seenA.at(-1)?.fraction).toBe(1);
    expect(seenB.at(-1)?.fraction).toBe(1);
  });

  it('pulls again when the image vanishes between the check and the create', async () => {
    const image = await pushFreshImage(docker, `vanished-${run}`, 100_000);
    freshImages.push(image);
    // The presence check says "there", pulled from its repository, although the engine does not have it.
    const pulledFrom = `${image.slice(0, image.lastIndexOf(':'))}@sha256:${'0'.repeat(64)}`;
    const getImage = vi
      .spyOn(docker, 'getImage')
      .mockImplementation((name) => Object.assign(Object.create(new Docker.Image(docker.modem, name)) as Docker.Image, { inspect: async () => ({ RepoDigests: [pulledFrom], Config: {} }) }));
    const pull = vi.spyOn(docker, 'pull');
    try {
      const handle = await runtime.startTask(task({ image }));
      expect(handle.state).toBe('running');
      expect(pull).toHaveBeenCalledTimes(1);
    } finally {
      getImage.mockRestore();
      pull.mockRestore();
    }
  });

  it('fails with pull_failed and Docker’s message for an unknown image, creating nothing', async () => {
    const spec = task({ image: '127.0.0.1:5000/svc/nope:1' });
    const err = await rejection(runtime.startTask(spec));
    expect(err.code).toBe('pull_failed');
    expect(err.recoverable).toBe(false);
    expect(err.message).toMatch(/svc\/nope:1.*(not found|manifest unknown)/);
    const made = await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTANCE}=${spec.taskId}`] } });
    expect(made).toEqual([]);
  });

  it('runs no image an instance names by its ID or a prefix of it, as Docker would read them', async () => {
    const id = (await docker.getImage(BUSYBOX_IMAGE).inspect()).Id;
    const hex = id.slice('sha256:'.length);
    for (const image of [id, hex, hex.slice(0, 12)]) {
      const spec = task({ image });
      const err = await rejection(runtime.startTask(spec));
      expect(err.code).toBe('pull_failed');
      // The two ID forms are refused as such; the prefix is a repository name (docker.io/library/<prefix>), which the node cannot pull.
      if (image !== hex.slice(0, 12)) expect(err.message).toMatch(/names an image by its ID/);
      const made = await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTANCE}=${spec.taskId}`] } });
      expect(made).toEqual([]);
    }
  });

  it('does not run an image tagged on the node under the name an instance gives: it pulls that name, which the registry lacks; a replica runs it', async () => {
    const repo = `${REGISTRY}/svc/local-only-${run}`;
    await docker.getImage(BUSYBOX_IMAGE).tag({ repo, tag: '1' });
    try {
      const spec = task({ image: `${repo}:1` });
      const err = await rejection(runtime.startTask(spec));
      expect(err.code).toBe('pull_failed');
      expect(err.message).toMatch(/local-only.*(not found|manifest unknown)/);
      expect(await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTANCE}=${spec.taskId}`] } })).toEqual([]);
      // The provider's own tag still serves its replicas (an image loaded on an offline node).
      const replica = await runtime.startTask(task({ kind: 'replica', image: `${repo}:1` }));
      expect(replica.state).toBe('running');
    } finally {
      await docker.getImage(`${repo}:1`).remove({ noprune: true }).catch(() => undefined);
    }
  });

  it('calls an unreachable registry a recoverable pull_failed', async () => {
    const err = await rejection(runtime.startTask(task({ image: '127.0.0.1:5999/svc/busybox:1' })));
    expect(err.code).toBe('pull_failed');
    expect(err.recoverable).toBe(true);
    expect(err.message).toMatch(/connection refused/);
  });
});

describe('DockerRuntime: start and inspect', () => {
  it('starts a labelled container and inspects it as running', async () => {
    const spec = task({ labels: { team: 'ml' } });
    const handle = await runtime.startTask(spec);

    // Made from the image the pull proved, by its ID.
    expect(handle).toMatchObject({ taskId: spec.taskId, kind: 'instance', image: (await docker.getImage(BUSYBOX_IMAGE).inspect()).Id, state: 'running' });
    const status = await runtime.inspectTask(handle.containerId);
    expect(status).toMatchObject({ taskId: spec.taskId, nodeId, state: 'running', exitCode: null, finishedAt: null, error: null });
    expect(status.startedAt!.getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(status.labels).toMatchObject({ [LABEL_INSTANCE]: spec.taskId, [LABEL_NODE]: nodeId, 'svc.label.team': 'ml' });
    const info = await docker.getContainer(handle.containerId).inspect();
    expect(info.HostConfig.Privileged).toBe(false);
  });

  it('returns the running container when the same task is started again', async () => {
    const spec = task();
    const first = await runtime.startTask(spec);
    const second = await runtime.startTask(spec);
    expect(second.containerId).toBe(first.containerId);
  });

  it('replaces a stopped leftover of the task on a retried start', async () => {
    const spec = task();
    const first = await runtime.startTask(spec);
    await runtime.stopTask(first.containerId, { timeoutMs: 0, force: true });
    const second = await runtime.startTask(spec);
    expect(second.containerId).not.toBe(first.containerId);
    expect(second.state).toBe('running');
    await expect(runtime.inspectTask(first.containerId)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('replaces a created-but-never-started leftover of the task', async () => {
    const spec = task();
    const leftover = await createBehindTheRuntime(spec);
    const handle = await runtime.startTask(spec);
    expect(handle.state).toBe('running');
    expect(handle.containerId).not.toBe(leftover.id);
  });

  it('refuses a container name owned by another node', async () => {
    const spec = task();
    await new DockerRuntime({ docker, nodeId: otherNodeId }).startTask(spec);
    const err = await rejection(runtime.startTask(spec));
    expect(err.code).toBe('create_failed');
    expect(err.message).toMatch(/does not own/);
  });

  it('fails with start_failed when the command cannot run, and removes the container', async () => {
    const spec = task({ command: ['/no/such/binary'] });
    const err = await rejection(runtime.startTask(spec));
    expect(err.code).toBe('start_failed');
    expect(err.message).toMatch(/no such file|not found/i);
    const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTANCE}=${spec.taskId}`] } });
    expect(left).toEqual([]);
  });

  it('waits for the exit code, and a wait can be abandoned', async () => {
    const exits = await runtime.startTask(task({ command: ['sh', '-c', 'sleep 0.3; exit 5'] }));
    expect(await runtime.waitTask(exits.containerId)).toEqual({ exitCode: 5, error: null });
    // Already exited: resolves at once.
    expect((await runtime.waitTask(exits.containerId)).exitCode).toBe(5);
    expect((await runtime.inspectTask(exits.containerId)).exitCode).toBe(5);

    const runs = await runtime.startTask(task());
    const abort = new AbortController();
    const waiting = runtime.waitTask(runs.containerId, abort.signal);
    abort.abort(new Error('agent shutting down'));
    await expect(waiting).rejects.toThrow('agent shutting down');
    expect((await runtime.inspectTask(runs.containerId)).state).toBe('running');
  });
});

describe('DockerRuntime: stop and destroy', () => {
  it('stops a container that traps SIGTERM gracefully: it exits 0 on the signal', async () => {
    const handle = await runtime.startTask(task({ command: TRAPS_TERM }));
    await waitForLog(docker, handle.containerId, 'ready');

    const [outcome, ms] = await timed(() => runtime.stopTask(handle.containerId, { timeoutMs: 10_000 }));

    expect(outcome).toBe('exited');
    expect(ms).toBeLessThan(3_000);
    const status = await runtime.inspectTask(handle.containerId);
    expect(status).toMatchObject({ state: 'exited', exitCode: 0 });
    await waitForLog(docker, handle.containerId, 'bye');
  });

  it('kills a container that ignores SIGTERM once the grace runs out (137)', async () => {
    const handle = await runtime.startTask(task({ command: IGNORES_TERM }));
    await waitForLog(docker, handle.containerId, 'ready');

    const [outcome, ms] = await timed(() => runtime.stopTask(handle.containerId, { timeoutMs: 1_000 }));

    expect(outcome).toBe('killed');
    expect(ms).toBeGreaterThanOrEqual(1_000);
    expect(ms).toBeLessThan(5_000);
    expect(await runtime.inspectTask(handle.containerId)).toMatchObject({ state: 'exited', exitCode: 137 });
  });

  it('force stop skips the grace', async () => {
    const handle = await runtime.startTask(task({ command: IGNORES_TERM }));
    await waitForLog(docker, handle.containerId, 'ready');

    const [outcome, ms] = await timed(() => runtime.stopTask(handle.containerId, { timeoutMs: 60_000, force: true }));

    expect(outcome).toBe('killed');
    expect(ms).toBeLessThan(3_000);
    expect((await runtime.inspectTask(handle.containerId)).exitCode).toBe(137);
  });

  it('is safe to repeat stop and destroy; a gone container is not_found for inspect and wait', async () => {
    const handle = await runtime.startTask(task());
    const id = handle.containerId;
    await expect(runtime.destroyTask(id)).rejects.toMatchObject({ code: 'task_running' });

    expect(await runtime.stopTask(id, { timeoutMs: 1_000, force: true })).toBe('killed');
    expect(await runtime.stopTask(id, { timeoutMs: 1_000 })).toBe('not_running');
    expect(await runtime.stopTask(id, { timeoutMs: 1_000, force: true })).toBe('not_running');
    await runtime.destroyTask(id);
    await runtime.destroyTask(id);
    await runtime.destroyTask(id, { force: true });
    expect(await runtime.stopTask(id, { timeoutMs: 1_000 })).toBe('not_running');
    await expect(runtime.inspectTask(id)).rejects.toMatchObject({ code: 'not_found', recoverable: false });
    await expect(runtime.waitTask(id)).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('DockerRuntime: recovery and reconcile', () => {
  it('a new runtime (a restarted agent) re-adopts running and exited containers of its node only', async () => {
    const running = await runtime.startTask(task({ command: TRAPS_TERM }));
    const exited = await runtime.startTask(task({ command: ['sh', '-c', 'exit 3'] }));
    await runtime.waitTask(exited.containerId);
    const other = new DockerRuntime({ docker, nodeId: otherNodeId });
    const foreign = await other.startTask(task());

    const restarted = new DockerRuntime({ docker, nodeId });
    const handles = await restarted.recoverTasks();

    const byId = new Map(handles.map((h) => [h.containerId, h]));
    expect(byId.get(running.containerId)).toMatchObject({ taskId: running.taskId, state: 'running' });
    expect(byId.get(exited.containerId)).toMatchObject({ taskId: exited.taskId, state: 'exited' });
    expect(byId.has(foreign.containerId)).toBe(false);
    expect(handles.every((h) => h.taskId.startsWith(`t${run}-`))).toBe(true);

    // The adopted handle is fully usable: stop it through the new runtime.
    await waitForLog(docker, running.containerId, 'ready');
    expect(await restarted.stopTask(running.containerId, { timeoutMs: 5_000 })).toBe('exited');
    expect((await restarted.waitTask(running.containerId)).exitCode).toBe(0);
   }, 90_000);

  it("sets the socket limit of an instance an older agent started (cgroup v1), when a restarted agent adopts it", async () => {
    if ((await docker.info()).CgroupVersion !== '1') return; // v2 charges socket buffers to memory.max itself
    // Started as an agent from before socket limits did: no cgroup made ahead, no limit.
    const old = new DockerRuntime({ docker, nodeId, socketLimits: false });
    const h = await old.startTask(task({ resources: { memoryBytes: 96 * MIB } }));
    const limitFile = `/sys/fs/cgroup/memory/docker/${h.containerId}/memory.kmem.tcp.limit_in_bytes`;
    expect(BigInt(readFileSync(limitFile, 'utf8').trim())).toBeGreaterThan(BigInt(2) ** BigInt(62));
    await new DockerRuntime({ docker, nodeId }).recoverTasks();
    expect(readFileSync(limitFile, 'utf8').trim()).toBe(String(96 * MIB));
    await runtime.destroyTask(h.containerId, { force: true });
  });

  it('reconcile removes unwanted and never-started containers of this node, keeps wanted and foreign ones', async () => {
    const wanted = await runtime.startTask(task());
    const unwanted = await runtime.startTask(task());
    // Created but never started: what a create that "failed" on the network leaves behind.
    const orphanSpec = task();
    const orphan = await createBehindTheRuntime(orphanSpec);
    const foreign = await new DockerRuntime({ docker, nodeId: otherNodeId }).startTask(task());

    const keep = new Set((await runtime.recoverTasks()).map((h) => h.taskId));
    keep.delete(unwanted.taskId);
    const { removed } = await runtime.reconcile(keep);

    expect(removed).toEqual(
      expect.arrayContaining([
        { containerId: unwanted.containerId, taskId: unwanted.taskId },
        { containerId: orphan.id, taskId: orphanSpec.taskId },
      ]),
    );
    expect(removed).toHaveLength(2);
    expect((await runtime.inspectTask(wanted.containerId)).state).toBe('running');
    expect((await runtime.inspectTask(foreign.containerId)).state).toBe('running');
    await expect(runtime.inspectTask(unwanted.containerId)).rejects.toMatchObject({ code: 'not_found' });
    await expect(runtime.inspectTask(orphan.id)).rejects.toMatchObject({ code: 'not_found' });
    // Their networks went with them; the wanted and the foreign task keep theirs.
    const networks = async (task: { kind: 'instance' | 'replica'; taskId: string }) => docker.listNetworks({ filters: { name: [networkName(task)] } });
    expect(await networks(unwanted)).toEqual([]);
    expect(await networks({ kind: 'instance', taskId: orphanSpec.taskId })).toEqual([]);
    expect(await networks(wanted)).toHaveLength(1);
    expect(await networks(foreign)).toHaveLength(1);
    // Nothing more to do the second time.
    expect((await runtime.reconcile(keep)).removed).toEqual([]);
   }, 90_000);

  it('reconcile removes a network left without its container (a crash between the two removals)', async () => {
    const stale = task();
    await docker.createNetwork(buildNetworkSpec(stale, nodeId, 'internet'));
    const keep = new Set((await runtime.recoverTasks()).map((h) => h.taskId));
    await runtime.reconcile(keep);
    expect(await docker.listNetworks({ filters: { name: [networkName(stale)] } })).toEqual([]);
  });
});

describe('isolation and limits', () => {
  const inspectNetwork = async (name: string) =>
    (await docker.getNetwork(name).inspect()) as { Internal: boolean; Labels: Record<string, string>; Options: Record<string, string>; Containers: Record<string, unknown> };

  it('runs each task alone on a network of its own, removed with the container', async () => {
    const a = await runtime.startTask(task());
    const b = await runtime.startTask(task());
    const infoA = await docker.getContainer(a.containerId).inspect();
    expect(Object.keys(infoA.NetworkSettings.Networks)).toEqual([networkName(a)]);
    const net = await inspectNetwork(networkName(a));
    expect(net.Internal).toBe(false);
    expect(net.Labels).toEqual({ [LABEL_INSTANCE]: a.taskId, [LABEL_NODE]: nodeId });
    expect(net.Options['com.docker.network.bridge.name']).toMatch(/^svci-[0-9a-f]{10}$/);
    expect(Object.keys(net.Containers)).toEqual([a.containerId]);
    expect(networkName(a)).not.toBe(networkName(b));
    await runtime.destroyTask(a.containerId, { force: true });
    await expect(docker.getNetwork(networkName(a)).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await runtime.destroyTask(b.containerId, { force: true });
  }, 90_000);

  it('gives replicas svcr- bridges and instances with outbound none an internal network', async () => {
    const replica = await runtime.startTask(task({ kind: 'replica' }));
    expect((await inspectNetwork(networkName(replica))).Options['com.docker.network.bridge.name']).toMatch(/^svcr-/);
    const sealed = await new DockerRuntime({ docker, nodeId, instanceOutbound: 'none' }).startTask(task());
    expect((await inspectNetwork(networkName(sealed))).Internal).toBe(true);
    for (const h of [replica, sealed]) await runtime.destroyTask(h.containerId, { force: true });
  }, 90_000);

  it('runs the container under the limits asked for, clamped to the host, with the capabilities cut down', async () => {
    const limited = new DockerRuntime({ docker, nodeId, limits: { ...DEFAULT_LIMIT_SETTINGS, reservedCpus: 1, reservedMemoryBytes: 2 * GIB, pidsLimit: 128, defaultDiskBytes: GIB, defaultNetworkMbps: 1000 } });
    const h = await limited.startTask(task({ resources: { nanoCpus: 26e9, memoryBytes: 256 * 1024 ** 2, shmBytes: 64 * 1024 ** 2 } }));
    const hc = (await docker.getContainer(h.containerId).inspect()).HostConfig as Docker.HostConfig & { OomScoreAdj: number };
    const cpus = (await docker.info()).NCPU as number;
    expect({ nanoCpus: hc.NanoCpus, memory: hc.Memory, swap: hc.MemorySwap, shm: hc.ShmSize, pids: hc.PidsLimit, oom: hc.OomScoreAdj }).toEqual({
      nanoCpus: Math.max(cpus - 1, 0.5) * 1e9,
      memory: 256 * 1024 ** 2,
      swap: 256 * 1024 ** 2,
      shm: 64 * 1024 ** 2,
      pids: 128,
      oom: 800,
    });
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd).not.toContain('NET_RAW');
    // What the kernel enforces, read from inside (cgroup v1 here; v2 hosts have memory.max and pids.max at the root).
    const exec = await docker.getContainer(h.containerId).exec({ Cmd: ['sh', '-c', 'cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null; df -k /dev/shm | tail -1'], AttachStdout: true, AttachStderr: true });
    const stream = await exec.start({});
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    await new Promise((r) => stream.on('end', r));
    const out = Buffer.concat(chunks).toString('utf8');
    expect(out).toContain('128');
    expect(out).toContain(String(256 * 1024 ** 2));
    expect(out).toMatch(/\b65536\b/); // /dev/shm: 64 MiB in 1K blocks
    await limited.destroyTask(h.containerId, { force: true });
  });

  it("takes from a tenant's image none of what would reach past its container: its HEALTHCHECK, its GPU variables, the agent's labels", async () => {
    // As a tenant would publish it: a health check every millisecond (each one an exec the
    // host's dockerd, containerd and runc pay for), CUDA's NVIDIA_VISIBLE_DEVICES=all, the
    // NVIDIA runtime's switches for the host's InfiniBand devices and IMEX channels, and the
    // label the agent reads SSH keys from.
    const builder = await docker.createContainer({
      Image: BUSYBOX_IMAGE,
      Cmd: ['sleep', '3600'],
      Env: ['NVIDIA_VISIBLE_DEVICES=all', 'NVIDIA_MOFED=enabled', 'NVIDIA_NVSWITCH=enabled', 'NVIDIA_IMEX_CHANNELS=all'],
      Labels: { 'svc.ssh-authorized-keys': 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHDpfDFWSHS8IylBDI2oXSZVN23M9Ir3nEtApaYA88Wp author', 'svc.test': 'image-builder' },
      Healthcheck: { Test: ['CMD', 'true'], Interval: 1_000_000 },
    });
    const image = `127.0.0.1:5000/svc/runtime-test:hostile-${run}`;
    try {
      await commitAndPush(docker, builder, image);
    } finally {
      await builder.remove({ force: true });
    }
    try {
      expect((await docker.getImage(image).inspect()).Config.Healthcheck?.Interval).toBe(1_000_000);
      const h = await runtime.startTask(task({ image }));
      await new Promise((r) => setTimeout(r, 1_500));
      const info = await docker.getContainer(h.containerId).inspect();
      expect(info.Config.Healthcheck?.Test).toEqual(['NONE']); // Docker keeps the image's interval beside it, unused
      expect(info.State.Health).toBeUndefined();
      // Docker merges the image's variables under the container's: each is there once, as the agent wrote it.
      expect(info.Config.Env.filter((e) => e.startsWith('NVIDIA_')).sort()).toEqual(['NVIDIA_VISIBLE_DEVICES=void', ...SHARED_DEVICES_OFF].sort());
      expect(info.Config.Labels['svc.ssh-authorized-keys']).toBe('');
      await runtime.destroyTask(h.containerId, { force: true });
    } finally {
      await deleteFreshImage(docker, image);
    }
  });

  it("hides from an instance what of the host's /proc and /sys tells of the host and its neighbours (interrupt counts, power meters, DMI), as well as Docker's own list; a replica sees Docker's view", async () => {
    const read = 'for f in /proc/interrupts /proc/kcore /proc/keys; do printf "%s=%s " $f $(cat $f 2>/dev/null | wc -c); done';
    const instance = await runtime.startTask(task());
    const replica = await runtime.startTask(task({ kind: 'replica' }));
    expect((await execIn(docker, instance.containerId, ['sh', '-c', read])).trim()).toBe('/proc/interrupts=0 /proc/kcore=0 /proc/keys=0');
    expect((await execIn(docker, replica.containerId, ['sh', '-c', read])).trim()).toMatch(/^\/proc\/interrupts=[1-9]\d* \/proc\/kcore=0 \/proc\/keys=0$/);
    const masked = (await docker.getContainer(instance.containerId).inspect()).HostConfig.MaskedPaths;
    expect(masked).toEqual(expect.arrayContaining(['/sys/devices/virtual/powercap', '/sys/devices/virtual/dmi', '/sys/firmware']));
    for (const h of [instance, replica]) await runtime.destroyTask(h.containerId, { force: true });
  });

  it("refuses an instance's image whose volumes nest (dockerd would copy its files once per level) or whose WORKDIR is under /proc, before a container is made; a replica's is not checked", async () => {
    const cases = [
      { tag: `nested-${run}`, changes: 'VOLUME ["/usr", "/usr/lib", "/usr/lib/x86_64-linux-gnu"]', problem: 'the image declares the volume /usr/lib inside its volume /usr' },
      { tag: `procdir-${run}`, changes: 'WORKDIR /proc/self/fd', problem: "the image's working directory /proc/self/fd is under /proc" },
    ];
    for (const { tag, changes, problem } of cases) {
      const builder = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['sleep', '3600'], Labels: { 'svc.test': 'image-builder' } });
      const image = `${REGISTRY}/svc/runtime-test:${tag}`;
      try {
        await commitAndPush(docker, builder, image, changes);
      } finally {
        await builder.remove({ force: true });
      }
      freshImages.push(image);
      const spec = task({ image });
      const err = await rejection(runtime.startTask(spec));
      expect(err).toMatchObject({ code: 'create_failed', recoverable: false, message: expect.stringContaining(problem) });
      expect(await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTANCE}=${spec.taskId}`] } })).toEqual([]);
    }
    const replica = await runtime.startTask(task({ kind: 'replica', image: `${REGISTRY}/svc/runtime-test:nested-${run}` }));
    expect(replica.state).toBe('running');
    await runtime.destroyTask(replica.containerId, { force: true });
  });

  it("refuses an instance's image from a registry on the node's own network, even one already on the node, unless the operator lists it; a replica's is not checked", async () => {
    const guarded = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed: [] } });
    const refused = task();
    const err = await rejection(guarded.startTask(refused));
    expect(err.code).toBe('pull_failed');
    expect(err.message).toBe(`image registry ${REGISTRY} is at a loopback address: instances pull only from registries on public addresses`);
    expect(err.recoverable).toBe(false);
    expect(await docker.listContainers({ all: true, filters: { name: [containerName(refused)] } })).toEqual([]);
    const replica = await guarded.startTask(task({ kind: 'replica' }));
    const listed = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed: [REGISTRY] } });
    const instance = await listed.startTask(task());
    for (const h of [replica, instance]) await listed.destroyTask(h.containerId, { force: true });
  });

  it("keeps a registry of the node's own images from instances, even for an image already on the node, and opens it to the pull proxy only while a replica pulls from it", async () => {
    const replicaPulls = new ReplicaPullWindow();
    const own = new DockerRuntime({ docker, nodeId, registryPolicy: { allowed: [], replicaOnly: [REGISTRY], replicaPulls } });
    const refused = task();
    const err = await rejection(own.startTask(refused));
    expect(err).toMatchObject({ code: 'pull_failed', recoverable: false, message: `image registry ${REGISTRY} holds this node's own images: instances pull from other registries` });
    expect(await docker.listContainers({ all: true, filters: { name: [containerName(refused)] } })).toEqual([]);

    const image = await pushFreshImage(docker, `own-${run}`);
    freshImages.push(image);
    const openWhilePulling: boolean[] = [];
    const replica = await own.startTask(task({ kind: 'replica', image }), () => openWhilePulling.push(replicaPulls.open));
    expect(replica.state).toBe('running');
    expect(openWhilePulling.length).toBeGreaterThan(1);
    expect(openWhilePulling.every(Boolean)).toBe(true);
    expect(replicaPulls.open).toBe(false);
    await own.destroyTask(replica.containerId, { force: true });
  });

  it("caps the DNS queries an instance sends Docker's embedded server (dockerd itself) inside its namespace; a replica is not capped", async () => {
    const capped = new DockerRuntime({ docker, nodeId, dnsQueriesPerSecond: 50 });
    const h = await capped.startTask(task());
    const flood = readFileSync(await buildStaticProgram('dns-flood'));
    expect((await ContainerProcess.run(docker, h.containerId, ['sh', '-c', 'cat > /tmp/dns-flood && chmod +x /tmp/dns-flood'], { stdin: flood })).code).toBe(0);
    const started = performance.now();
    const r = await ContainerProcess.run(docker, h.containerId, ['/tmp/dns-flood', '2']);
    const seconds = (performance.now() - started) / 1000;
    const [tried, sent] = r.stdout.trim().split(' ').map(Number) as [number, number];
    expect(r.code, r.stderr).toBe(0);
    expect(tried).toBeGreaterThan(10_000);
    // What the kernel let out is what dockerd had to answer: the rate over the flood's time
    // and the burst. The rest failed on the tenant's side (EPERM), as the rule counted.
    expect(sent).toBeLessThan(50 * (seconds + 1) + 100);
    const pid = (await docker.getContainer(h.containerId).inspect()).State.Pid;
    const { stdout } = await promisify(execFile)('nsenter', [`--target=${pid}`, '--net', '--', 'iptables', '-L', 'OUTPUT', '-v', '-x', '-n']);
    expect(Number(/^\s*(\d+)\s+\d+\s+DROP\s+(?:17|udp)\b/m.exec(stdout)?.[1])).toBe(tried - sent);
    // Once the bucket refills, the container's own name resolves again.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const name = containerName(h);
    expect((await ContainerProcess.run(docker, h.containerId, ['nslookup', name, '127.0.0.11'])).stdout).toMatch(/Address: \d+\.\d+\.\d+\.\d+/);
    const replica = await capped.startTask(task({ kind: 'replica' }));
    const replicaPid = (await docker.getContainer(replica.containerId).inspect()).State.Pid;
    expect((await promisify(execFile)('nsenter', [`--target=${replicaPid}`, '--net', '--', 'iptables', '-S', 'OUTPUT'])).stdout.trim()).toBe('-P OUTPUT ACCEPT');
    for (const t of [h, replica]) await capped.destroyTask(t.containerId, { force: true });
  }, 90_000);

  it("keeps an instance from filling the host's neighbour table: nothing it sends to its subnet leaves it, but what goes to its gateway", async () => {
    const h = await runtime.startTask(task());
    const info = await docker.getContainer(h.containerId).inspect();
    const network = Object.values(info.NetworkSettings.Networks)[0]!;
    const sweep = readFileSync(await buildStaticProgram('subnet-sweep'));
    expect((await ContainerProcess.run(docker, h.containerId, ['sh', '-c', 'cat > /tmp/subnet-sweep && chmod +x /tmp/subnet-sweep'], { stdin: sweep })).code).toBe(0);
    const swept = await ContainerProcess.run(docker, h.containerId, ['/tmp/subnet-sweep', network.IPAddress, String(network.IPPrefixLen), '3']);
    expect(swept.code, swept.stderr).toBe(0);
    // Docker's pools hand out /16s: far more addresses than the kernel's 1,024 entries.
    expect(network.IPPrefixLen).toBeLessThanOrEqual(20);
    expect(Number(swept.stdout.trim())).toBeGreaterThan(4_000);
    // The gateway (the way out) is still asked for: an answer from it, a refusal, makes its entry.
    await ContainerProcess.run(docker, h.containerId, ['sh', '-c', `nc -w 2 ${network.Gateway} 1 </dev/null; true`]);
    const { stdout } = await promisify(execFile)('nsenter', [`--target=${info.State.Pid}`, '--net', '--', 'ip', '-4', 'neigh', 'show', 'dev', 'eth0']);
    const entries = stdout.trim().split('\n').filter(Boolean);
    expect(entries).toEqual([expect.stringMatching(new RegExp(`^${network.Gateway.replaceAll('.', '\\.')} lladdr `))]);
    await runtime.destroyTask(h.containerId, { force: true });
  }, 60_000);

  it("tracks none of an instance's own flows in its namespace but the embedded DNS's: the connection table's memory is charged to nobody", async () => {
    const h = await runtime.startTask(task());
    const pid = (await docker.getContainer(h.containerId).inspect()).State.Pid;
    const fill = readFileSync(await buildStaticProgram('conntrack-fill'));
    expect((await ContainerProcess.run(docker, h.containerId, ['sh', '-c', 'cat > /tmp/conntrack-fill && chmod +x /tmp/conntrack-fill'], { stdin: fill })).code).toBe(0);
    const filled = await ContainerProcess.run(docker, h.containerId, ['/tmp/conntrack-fill', '20000']);
    expect(filled.stdout.trim()).toBe('sent 20000');
    const count = async () => Number((await promisify(execFile)('nsenter', [`--target=${pid}`, '--net', '--', 'cat', '/proc/sys/net/netfilter/nf_conntrack_count'])).stdout.trim());
    expect(await count()).toBeLessThan(100);
    // The embedded DNS still answers (its replies are translated back by tracked flows).
    const name = (await docker.getContainer(h.containerId).inspect()).Name.replace(/^\//, '');
    expect(await execIn(docker, h.containerId, ['sh', '-c', `nslookup ${name} 127.0.0.11 2>&1`])).toMatch(/^Name:/m);
    await runtime.destroyTask(h.containerId, { force: true });
  }, 60_000);

  it("throttles an instance's reads and writes on the disk holding Docker's data to its share, in bytes and in operations; a replica is not throttled", async () => {
    const disk = await diskUnder(((await docker.info()) as { DockerRootDir: string }).DockerRootDir);
    expect(disk, 'the disk under Docker\'s data root').toBeDefined();
    // Seconds a command takes inside the container (direct I/O: the page cache would hide the disk).
    const seconds = async (containerId: string, command: string): Promise<number> => {
      const started = performance.now();
      const out = await execIn(docker, containerId, ['sh', '-c', `${command} 2>&1 && echo done`]);
      expect(out).toContain('done');
      return (performance.now() - started) / 1000;
    };
    const write8MiB = 'dd if=/dev/zero of=/f bs=1048576 count=8 oflag=direct';
    const read8MiB = 'dd if=/f of=/dev/null bs=1048576 iflag=direct';
    const write100Blocks = 'dd if=/dev/zero of=/g bs=4096 count=100 oflag=direct';

    const bytes = new DockerRuntime({ docker, nodeId, limits: { ...DEFAULT_LIMIT_SETTINGS, diskMBpsPerGpu: 4, diskIopsPerGpu: 0 } });
    const ops = new DockerRuntime({ docker, nodeId, limits: { ...DEFAULT_LIMIT_SETTINGS, diskMBpsPerGpu: 0, diskIopsPerGpu: 50 } });
    const [byBytes, byOps, replica] = [await bytes.startTask(task()), await ops.startTask(task()), await bytes.startTask(task({ kind: 'replica' }))];
    // 8 MiB at 4 MB/s is 2.1 s each way; 100 writes at 50 a second, 2 s.
    expect(await seconds(byBytes.containerId, write8MiB)).toBeGreaterThan(1.5);
    expect(await seconds(byBytes.containerId, read8MiB)).toBeGreaterThan(1.5);
    expect(await seconds(byOps.containerId, write100Blocks)).toBeGreaterThan(1.5);
    // What the kernel holds, from the container's own blkio group (cgroup v1) or io.max (v2).
    const kernel = await execIn(docker, byBytes.containerId, ['sh', '-c', 'cat /sys/fs/cgroup/blkio/blkio.throttle.write_bps_device /sys/fs/cgroup/io.max 2>/dev/null']);
    expect(kernel).toMatch(new RegExp(`^${disk!.major}:${disk!.minor} (4000000|.*wbps=4000000)`, 'm'));
    // The provider's model server loads its weights at the disk's own speed: no throttle at all.
    const replicaConfig = (await docker.getContainer(replica.containerId).inspect()).HostConfig;
    expect([replicaConfig.BlkioDeviceReadBps, replicaConfig.BlkioDeviceWriteBps, replicaConfig.BlkioDeviceReadIOps, replicaConfig.BlkioDeviceWriteIOps].map((list) => list ?? [])).toEqual([[], [], [], []]);
    for (const h of [byBytes, byOps, replica]) await runtime.destroyTask(h.containerId, { force: true });
  }, 60_000);

  it("charges an instance's socket buffers to it: TCP and UDP sockets it never reads hold no more than its memory limit; a replica's are not held", async () => {
    const [tcpHog, udpHog] = [readFileSync(await buildStaticProgram('tcp-hog')), readFileSync(await buildStaticProgram('udp-hog'))];
    /** MiB the program queued, capped at 512: it stops there. */
    const queue = async (containerId: string, program: Buffer, args: string[]): Promise<number> => {
      expect((await ContainerProcess.run(docker, containerId, ['sh', '-c', 'cat > /tmp/hog && chmod +x /tmp/hog'], { stdin: program })).code).toBe(0);
      const result = await ContainerProcess.run(docker, containerId, ['/tmp/hog', ...args], { timeoutMs: 60_000 });
      expect(result.code, result.stderr).toBe(0);
      return Number(result.stdout.trim());
    };
    // 400 connected TCP pairs on loopback, written to until the kernel takes no more; 20,000
    // UDP receivers sent datagrams until their buffers are full.
    const tcp = (id: string) => queue(id, tcpHog, ['400', '512']);
    const udp = (id: string) => queue(id, udpHog, ['20000', '512']);
    const instance = await runtime.startTask(task({ resources: { memoryBytes: 128 * MIB } }));
    const replica = await runtime.startTask(task({ kind: 'replica', resources: { memoryBytes: 128 * MIB } }));
    try {
      // Unheld on cgroup v1, an instance of 256 MiB queued 2.2 GiB each way (and the host's
      // pools under pressure slowed every connection on it).
      expect(await tcp(instance.containerId)).toBeLessThan(256);
      expect(await tcp(replica.containerId)).toBe(512);
      expect(await udp(instance.containerId)).toBeLessThan(256);
      expect(await udp(replica.containerId)).toBe(512);
      // On cgroup v1 the limit is the agent's doing: the cgroup it made, with the memory limit as the TCP limit.
      if ((await docker.info()).CgroupVersion === '1') {
        const pid = (await docker.getContainer(instance.containerId).inspect()).State.Pid;
        expect(readFileSync(`/proc/${pid}/cgroup`, 'utf8')).toMatch(new RegExp(`^\\d+:memory:/docker/${instance.containerId}$`, 'm'));
        expect(readFileSync(`/sys/fs/cgroup/memory/docker/${instance.containerId}/memory.kmem.tcp.limit_in_bytes`, 'utf8').trim()).toBe(String(128 * MIB));
      }
    } finally {
      for (const h of [instance, replica]) await runtime.destroyTask(h.containerId, { force: true });
    }
  }, 120_000);

  it("gives each instance a /dev/pts of its own, capped: one that takes every terminal it can leaves the others theirs", async () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-pts-'));
    const capped = new DockerRuntime({ docker, nodeId, pts: { root, max: 8 } });
    const [a, b] = [await capped.startTask(task()), await capped.startTask(task())];
    try {
      // Running, each container holds its own mount: nothing stays mounted on the host.
      expect([...devptsMountPoints(readFileSync('/proc/self/mountinfo', 'utf8'))].filter((p) => p.startsWith(root))).toEqual([]);
      const hog = readFileSync(await buildStaticProgram('pty-hog'));
      expect((await ContainerProcess.run(docker, a.containerId, ['sh', '-c', 'cat > /tmp/pty-hog && chmod +x /tmp/pty-hog'], { stdin: hog })).code).toBe(0);
      await execIn(docker, a.containerId, ['sh', '-c', '/tmp/pty-hog 60 > /tmp/hog.out 2>&1 &']);
      await vi.waitFor(async () => expect(await execIn(docker, a.containerId, ['cat', '/tmp/hog.out'])).toBe('8 ENOSPC\n'), { timeout: 10_000, interval: 100 });
      // With Docker's own /dev/pts it took 3,071, the host's whole table for containers, and
      // every other container's `docker exec -t` (each SSH session with a terminal) failed.
      expect(await ttyIn(b.containerId)).toMatch(/^\/dev\/pts\/\d+$/);
      await expect(ttyIn(a.containerId)).rejects.toThrow(/no space left on device/);
    } finally {
      for (const t of [a, b]) await capped.destroyTask(t.containerId, { force: true });
    }
    expect(readdirSync(root)).toEqual([]);
    rmSync(root, { recursive: true });
  }, 60_000);

  it("shapes an instance's network each way to what it was sold, which root in the container cannot lift; a replica is not shaped", async () => {
    // 40 Mbit/s moves 5 MiB in about a second each way; unshaped, this link moves it in
    // tens of milliseconds. The host connects (as the SSH gateway does), so the host
    // firewall, which keeps instances from opening connections to the host, lets it by.
    const MIB = 5;
    const shaped = await runtime.startTask(
      task({
        resources: { networkMbps: 40 },
        command: ['sh', '-c', `(dd if=/dev/zero bs=1048576 count=${MIB} 2>/dev/null | nc -l -p 7000) & (sleep 600 | nc -l -p 7001 >/dev/null) & wait`],
      }),
    );
    const address = await containerAddress(shaped.containerId);
    const [received, downMs] = await tcpReceive(address, 7000);
    expect(received).toBe(MIB * 1024 * 1024);
    expect(downMs).toBeGreaterThan(800);
    expect(await tcpSend(address, 7001, MIB * 1024 * 1024)).toBeGreaterThan(800);

    // Root in the container sees the bucket and holds no capability to change its link.
    const inside = await execIn(docker, shaped.containerId, ['sh', '-c', 'tc qdisc show dev eth0; ip link set dev eth0 down; echo rc=$?']);
    expect(inside).toMatch(/qdisc tbf \S+ root/);
    expect(inside).toContain('Operation not permitted');
    expect(inside).not.toContain('rc=0');
    const pid = (await docker.getContainer(shaped.containerId).inspect()).State.Pid;
    const { stdout } = await promisify(execFile)('nsenter', [`--target=${pid}`, '--net', '--', 'tc', 'qdisc', 'show', 'dev', 'eth0']);
    expect(stdout).toMatch(/qdisc tbf \S+ root .*rate 40Mbit/);

    const replica = await runtime.startTask(task({ kind: 'replica', resources: { networkMbps: 40 } }));
    expect(await execIn(docker, replica.containerId, ['tc', 'qdisc', 'show', 'dev', 'eth0'])).not.toContain('tbf');
    for (const h of [shaped, replica]) await runtime.destroyTask(h.containerId, { force: true });
  }, 60_000);
});

async function containerAddress(containerId: string): Promise<string> {
  const networks = (await docker.getContainer(containerId).inspect()).NetworkSettings.Networks;
  return Object.values(networks)[0]!.IPAddress;
}

/** Connects once the container's listener is up (it starts with the container). */
async function connected(host: string, port: number): Promise<Socket> {
  for (let i = 0; ; i++) {
    try {
      return await new Promise<Socket>((resolve, reject) => {
        const socket = connect(port, host, () => resolve(socket));
        socket.once('error', reject);
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ECONNREFUSED' || i >= 100) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Reads what the listener sends until it closes: the bytes read and the milliseconds that took. */
async function tcpReceive(host: string, port: number): Promise<[number, number]> {
  const socket = await connected(host, port);
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    let bytes = 0;
    socket.on('data', (c: Buffer) => (bytes += c.length));
    socket.on('error', reject);
    socket.on('close', () => resolve([bytes, Date.now() - t0]));
  });
}

/** Sends `bytes`; the milliseconds until the listener had read them all and closed. */
async function tcpSend(host: string, port: number, bytes: number): Promise<number> {
  const socket = await connected(host, port);
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    socket.on('data', () => undefined);
    socket.on('error', reject);
    socket.on('close', () => resolve(Date.now() - t0));
    socket.end(Buffer.alloc(bytes));
  });
}
