// The supervisor over the real Docker runtime and engine, with the loopback registry.
import { randomUUID } from 'node:crypto';
import Docker from 'dockerode';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE } from '../../../test/support/images.js';
import { startStallingRegistry } from '../../../test/support/stalling-registry.js';
import { LABEL_NODE } from '../runtime/container-spec.js';
import { DockerRuntime } from '../runtime/docker-runtime.js';
import { ensureBusybox } from '../runtime/docker-test-images.js';
import type { ProgressListener, TaskHandle, TaskSpec } from '../runtime/runtime.js';
import { TaskSupervisor, type TaskReport } from './task-supervisor.js';

const docker = new Docker();
const nodeId = `node-sup-${randomUUID().slice(0, 8)}`;
const log = pino({ level: 'silent' });

function supervisor(): { sup: TaskSupervisor; reports: TaskReport[] } {
  const reports: TaskReport[] = [];
  const sup = new TaskSupervisor(new DockerRuntime({ nodeId, docker }), (r) => reports.push(r), log);
  return { sup, reports };
}

async function until(check: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const states = (reports: TaskReport[], taskId: string) => reports.filter((r) => r.task_id === taskId).map((r) => r.state);
const task = (taskId: string, command: string[]) => ({ taskId, kind: 'instance' as const, image: BUSYBOX_IMAGE, gpuUuids: [], command });
const TRAP = ['sh', '-c', 'trap "exit 0" TERM; echo ready; while true; do sleep 0.1; done'];
/** A tenant's process that ignores SIGTERM: only SIGKILL ends it. */
const IGNORE_TERM = ['sh', '-c', 'trap "" TERM; while true; do sleep 0.1; done'];

beforeAll(() => ensureBusybox(docker), 60_000);
afterAll(async () => {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`${LABEL_NODE}=${nodeId}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true });
  }
});

describe('TaskSupervisor', () => {
  it('starts a task and reports pulling then running; a graceful stop reports stopping then gone', async () => {
    const { sup, reports } = supervisor();
    sup.start(task('inst_a', TRAP));
    await until(() => states(reports, 'inst_a').includes('running'));
    expect(states(reports, 'inst_a')[0]).toBe('pulling');
    expect(sup.runningTasks().map((r) => r.task_id)).toEqual(['inst_a']);
    await sup.stop({ taskId: 'inst_a', kind: 'instance', timeoutMs: 5_000, force: false });
    expect(states(reports, 'inst_a').slice(-2)).toEqual(['stopping', 'gone']);
    expect(reports.at(-1)!.exit_code).toBe(0);
    expect(await docker.listContainers({ all: true, filters: { label: [`svc.instance=inst_a`, `${LABEL_NODE}=${nodeId}`] } })).toEqual([]);
  }, 30_000);

  it('kills an instance that fills more disk, or holds more files, than its limits, reports it gone and why; its neighbour runs on', async () => {
    const reports: TaskReport[] = [];
    const sup = new TaskSupervisor(new DockerRuntime({ nodeId, docker }), (r) => reports.push(r), log, { disk: { intervalMs: 200, defaultLimitBytes: 1024 ** 3, maxFiles: 2000 } });
    const limited = (taskId: string, command: string[]) => ({ ...task(taskId, command), resources: { diskBytes: 20 * 1024 ** 2 } });
    sup.start(limited('inst_filler', ['sh', '-c', 'trap "" TERM; dd if=/dev/zero of=/fill bs=1M count=30; while true; do sleep 0.1; done']));
    sup.start(limited('inst_quiet', ['sh', '-c', 'dd if=/dev/zero of=/fill bs=1M count=5; while true; do sleep 0.1; done']));
    sup.start(limited('inst_files', ['sh', '-c', 'mkdir /many && cd /many && i=0; while [ $i -lt 3000 ]; do : > f$i; i=$((i+1)); done; while true; do sleep 0.1; done']));
    await until(() => states(reports, 'inst_filler').includes('gone') && states(reports, 'inst_files').includes('gone'));
    // Counted while it was still creating them, perhaps: somewhere past the limit.
    const files = /^stopped by its node: the instance held ([\d,]+) files on disk, over its limit of 2,000 /.exec(reports.find((r) => r.task_id === 'inst_files' && r.state === 'gone')!.message);
    expect(Number(files?.[1]?.replaceAll(',', ''))).toBeGreaterThan(2000);
    const gone = reports.find((r) => r.task_id === 'inst_filler' && r.state === 'gone')!;
    expect(gone.message).toMatch(/^stopped by its node: the instance used 30\.\d MiB of disk, over its limit of 20\.0 MiB/);
    // Killed at once (it ignores SIGTERM: no grace for more writing), and removed.
    expect(gone.exit_code).toBe(137);
    expect(await docker.listContainers({ all: true, filters: { label: [`svc.instance=inst_filler`, `${LABEL_NODE}=${nodeId}`] } })).toEqual([]);
    // Three more passes: the quiet one, within its limit, is still running.
    await new Promise((r) => setTimeout(r, 700));
    expect(states(reports, 'inst_quiet')).not.toContain('gone');
    expect(sup.runningTasks().map((r) => r.task_id)).toEqual(['inst_quiet']);
    await sup.stop({ taskId: 'inst_quiet', kind: 'instance', timeoutMs: 0, force: true });
    sup.detach();
  }, 30_000);

  it('reports failed with the pull error for an image that does not exist', async () => {
    const { sup, reports } = supervisor();
    sup.start({ ...task('inst_bad', ['true']), image: '127.0.0.1:5000/svc/does-not-exist:1' });
    await until(() => states(reports, 'inst_bad').includes('failed'));
    expect(reports.at(-1)!.message).toMatch(/pull failed/);
  });

  it('reports exited with the exit code when the task ends by itself', async () => {
    const { sup, reports } = supervisor();
    sup.start(task('inst_exit', ['sh', '-c', 'sleep 0.3; exit 3']));
    await until(() => states(reports, 'inst_exit').includes('exited'));
    expect(reports.at(-1)).toMatchObject({ state: 'exited', exit_code: 3 });
    // When it stopped, as Docker recorded it: billing ends there.
    const stoppedAt = reports.at(-1)!.stopped_at_ms;
    expect(stoppedAt).toBeGreaterThan(reports.find((r) => r.state === 'running')!.at_ms - 1_000);
    expect(stoppedAt).toBeLessThanOrEqual(reports.at(-1)!.at_ms);
  });

  it('joins a repeated stop to the one in flight (one grace, one gone), and a forced one kills at once', async () => {
    const { sup, reports } = supervisor();
    sup.start(task('inst_stubborn', IGNORE_TERM));
    await until(() => states(reports, 'inst_stubborn').includes('running'));
    // A grace far longer than the test may run: only the forced stop can end it.
    const first = sup.stop({ taskId: 'inst_stubborn', kind: 'instance', timeoutMs: 600_000, force: false });
    await until(() => states(reports, 'inst_stubborn').includes('stopping'));
    const again = sup.stop({ taskId: 'inst_stubborn', kind: 'instance', timeoutMs: 600_000, force: false });
    await sup.stop({ taskId: 'inst_stubborn', kind: 'instance', timeoutMs: 0, force: true });
    await Promise.all([first, again]);
    expect(states(reports, 'inst_stubborn').slice(-2)).toEqual(['stopping', 'gone']);
    expect(states(reports, 'inst_stubborn').filter((s) => s === 'stopping')).toHaveLength(1);
    const gone = reports.at(-1)!;
    expect(gone.exit_code).toBe(137);
    expect(gone.stopped_at_ms).toBeGreaterThan(0);
    expect(gone.stopped_at_ms).toBeLessThanOrEqual(gone.at_ms);
    expect(await docker.listContainers({ all: true, filters: { label: [`svc.instance=inst_stubborn`, `${LABEL_NODE}=${nodeId}`] } })).toEqual([]);
  }, 30_000);

  it('re-adopts a running task after an agent restart and can stop it', async () => {
    const first = supervisor();
    first.sup.start(task('inst_keep', TRAP));
    await until(() => states(first.reports, 'inst_keep').includes('running'));
    first.sup.detach();

    const second = supervisor();
    const running = await second.sup.recover();
    expect(running.map((r) => [r.task_id, r.state])).toEqual([['inst_keep', 'running']]);
    await second.sup.stop({ taskId: 'inst_keep', kind: 'instance', timeoutMs: 0, force: true });
    expect(states(second.reports, 'inst_keep')).toEqual(['stopping', 'gone']);
  }, 30_000);

  it('reports a container that stopped while the agent was away as exited, with when Docker saw it stop', async () => {
    const first = supervisor();
    first.sup.start(task('inst_died', TRAP));
    await until(() => states(first.reports, 'inst_died').includes('running'));
    first.sup.detach();
    const [container] = await docker.listContainers({ filters: { label: [`svc.instance=inst_died`, `${LABEL_NODE}=${nodeId}`] } });
    await docker.getContainer(container!.Id).kill();
    const finishedAt = Date.parse((await docker.getContainer(container!.Id).inspect()).State.FinishedAt);

    const second = supervisor();
    expect(await second.sup.recover()).toEqual([]);
    const exited = second.reports.find((r) => r.task_id === 'inst_died')!;
    expect(exited).toMatchObject({ state: 'exited', exit_code: 137, stopped_at_ms: finishedAt });
  }, 30_000);

  it('removes a labelled container that was created but never started when it recovers', async () => {
    const leftover = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['true'], Labels: { 'svc.instance': 'inst_half', [LABEL_NODE]: nodeId } });
    const { sup } = supervisor();
    await sup.recover();
    await expect(docker.getContainer(leftover.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
  });

  it('treats a stop for an unknown task as done', async () => {
    const { sup, reports } = supervisor();
    await sup.stop({ taskId: 'inst_never', kind: 'instance', timeoutMs: 1000, force: false });
    expect(states(reports, 'inst_never')).toEqual(['stopping', 'gone']);
    // No container, so no stop time: the control plane bills to its last contact.
    expect(reports.at(-1)!.stopped_at_ms).toBe(0);
  });

  describe('a stop that comes while the instance is still starting', () => {
    // Task IDs of this run: a run cut off half-way may leave a task's network behind.
    const id = (name: string) => `inst_${name}_${nodeId.slice(-8)}`;
    const instanceContainers = (taskId: string) => docker.listContainers({ all: true, filters: { label: [`svc.instance=${taskId}`, `${LABEL_NODE}=${nodeId}`] } });

    it("calls its pull off (the image's download ends), reports it gone rather than failed, and leaves a pull another start shares to that one", async () => {
      const registry = await startStallingRegistry();
      try {
        const runtime = new DockerRuntime({ docker, nodeId });
        const reports: TaskReport[] = [];
        const sup = new TaskSupervisor(runtime, (r) => reports.push(r), log);
        const order = (taskId: string) => ({ ...task(taskId, ['sh']), image: registry.image });
        sup.start(order(id('pull_a')));
        sup.start(order(id('pull_b')));
        // Both wait on one download, which the registry never finishes (a pull of up to an hour).
        await until(() => registry.openDownloads() > 0);
        // A graceful stop with a grace longer than the test may run.
        await sup.stop({ taskId: id('pull_a'), kind: 'instance', timeoutMs: 600_000, force: false });
        expect(states(reports, id('pull_a')).slice(-2)).toEqual(['stopping', 'gone']);
        expect(states(reports, id('pull_a'))).not.toContain('failed');
        // The other start still wants the image: its pull goes on.
        expect(runtime.pulls.inFlightImages).toEqual([registry.image]);
        expect(states(reports, id('pull_b'))).not.toContain('failed');
        await sup.stop({ taskId: id('pull_b'), kind: 'instance', timeoutMs: 600_000, force: false });
        expect(states(reports, id('pull_b')).slice(-2)).toEqual(['stopping', 'gone']);
        expect(states(reports, id('pull_b'))).not.toContain('failed');
        // Nobody waits for the image now: its download from the tenant's registry ends.
        expect(runtime.pulls.inFlightImages).toEqual([]);
        await expect.poll(() => registry.openDownloads(), { timeout: 10_000 }).toBe(0);
        expect([...(await instanceContainers(id('pull_a'))), ...(await instanceContainers(id('pull_b')))]).toEqual([]);
        expect(sup.runningTasks()).toEqual([]);
      } finally {
        await registry.close();
      }
    }, 30_000);

    it('kills at once, whatever the grace asked, a container its start made before it heard of the stop; no running is reported', async () => {
      // A start already past its last check when the stop came (it makes and starts the
      // container regardless): the tenant's command ignores SIGTERM, so any grace would be
      // time on the GPUs that nobody is billed for.
      let stopCame!: () => void;
      const stopped = new Promise<void>((resolve) => (stopCame = resolve));
      class PastItsChecks extends DockerRuntime {
        override async startTask(spec: TaskSpec, onProgress?: ProgressListener): Promise<TaskHandle> {
          await stopped;
          return super.startTask(spec, onProgress);
        }
      }
      const reports: TaskReport[] = [];
      const sup = new TaskSupervisor(new PastItsChecks({ nodeId, docker }), (r) => reports.push(r), log);
      sup.start(task(id('late'), IGNORE_TERM));
      const stopping = sup.stop({ taskId: id('late'), kind: 'instance', timeoutMs: 600_000, force: false });
      stopCame();
      await stopping;
      expect(states(reports, id('late'))).not.toContain('running');
      expect(states(reports, id('late')).slice(-2)).toEqual(['stopping', 'gone']);
      const gone = reports.at(-1)!;
      expect(gone.exit_code).toBe(137);
      // When it stopped, as Docker recorded it.
      expect(gone.stopped_at_ms).toBeGreaterThan(0);
      expect(gone.stopped_at_ms).toBeLessThanOrEqual(gone.at_ms);
      expect(await instanceContainers(id('late'))).toEqual([]);
      expect(sup.runningTasks()).toEqual([]);
    }, 30_000);
  });
});
