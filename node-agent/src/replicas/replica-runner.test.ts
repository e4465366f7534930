// Replicas through the task supervisor, on the real Docker engine with a real HTTP model
// server stand-in (busybox httpd) from the loopback registry: health checks, restarts
// with backoff, re-adoption after an agent restart, stop.
import { randomUUID } from 'node:crypto';
import Docker from 'dockerode';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL_SERVER_STANDIN_IMAGE } from '../../../test/support/images.js';
import { LABEL_NODE } from '../runtime/container-spec.js';
import { DockerRuntime } from '../runtime/docker-runtime.js';
import { TaskSupervisor, type StartOrder, type TaskReport } from '../tasks/task-supervisor.js';
import type { ReplicaSettings } from './replica-runner.js';

const docker = new Docker();
const nodeId = `node-rep-${randomUUID().slice(0, 8)}`;
const log = pino({ level: 'silent' });
const SETTINGS: ReplicaSettings = { host: '127.0.0.1', healthIntervalMs: 200, startTimeoutMs: 30_000, unhealthyRestartMs: 0 };

function supervisor(settings: Partial<ReplicaSettings> = {}): { sup: TaskSupervisor; reports: TaskReport[] } {
  const reports: TaskReport[] = [];
  const sup = new TaskSupervisor(new DockerRuntime({ nodeId, docker }), (r) => reports.push(r), log, { replicas: { ...SETTINGS, ...settings } });
  return { sup, reports };
}

const order = (taskId: string, image = MODEL_SERVER_STANDIN_IMAGE): StartOrder => ({
  taskId,
  kind: 'replica',
  image,
  gpuUuids: [],
  command: ['--model', '/models/tiny.gguf', '--served-model-name', 'tiny', '--port', '8000'],
  containerPort: 8000,
  healthPath: '/health',
});

async function until<T>(probe: () => T | undefined | false, what: string, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const of = (reports: TaskReport[], taskId: string) => reports.filter((r) => r.task_id === taskId);
const states = (reports: TaskReport[], taskId: string) => of(reports, taskId).map((r) => r.state);
const containersOf = (taskId: string) => docker.listContainers({ all: true, filters: { label: [`svc.replica=${taskId}`, `${LABEL_NODE}=${nodeId}`] } });
const exec = async (containerId: string, cmd: string[]) => {
  const e = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await e.start({});
  await new Promise((resolve) => stream.on('end', resolve).resume());
};

beforeAll(async () => {
  // The stand-in comes from the loopback registry (scripts/setup-host.sh pushes it).
  await docker.getImage(MODEL_SERVER_STANDIN_IMAGE).inspect();
}, 60_000);

afterAll(async () => {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`${LABEL_NODE}=${nodeId}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true });
  }
});

describe('replica supervision', () => {
  it('starts the server with its port published, reports starting then running with the endpoint, and stops it', async () => {
    const { sup, reports } = supervisor();
    sup.start(order('rep_basic'));
    const running = await until(() => of(reports, 'rep_basic').find((r) => r.state === 'running'), 'running');
    expect(states(reports, 'rep_basic')).toContain('starting');
    expect(states(reports, 'rep_basic')[0]).toBe('pulling');
    expect(running.endpoint).toMatch(/^127\.0\.0\.1:\d+$/);
    // The model server really answers there, started with the order's arguments.
    expect(await (await fetch(`http://${running.endpoint}/args`)).text()).toBe('--model /models/tiny.gguf --served-model-name tiny --port 8000\n');
    expect(sup.runningTasks()).toMatchObject([{ task_id: 'rep_basic', kind: 'REPLICA', state: 'running', endpoint: running.endpoint }]);

    await sup.stop({ taskId: 'rep_basic', kind: 'replica', timeoutMs: 5_000, force: false });
    expect(states(reports, 'rep_basic').slice(-2)).toEqual(['stopping', 'gone']);
    expect(reports.at(-1)!.exit_code).toBe(0); // the stand-in exits 0 on SIGTERM
    expect(await containersOf('rep_basic')).toEqual([]);
    expect(sup.runningTasks()).toEqual([]);
  }, 30_000);

  it('restarts a killed server after the backoff, with a new container and endpoint', async () => {
    const { sup, reports } = supervisor();
    sup.start(order('rep_crash'));
    const first = await until(() => of(reports, 'rep_crash').find((r) => r.state === 'running'), 'running');
    const [before] = await containersOf('rep_crash');
    await docker.getContainer(before!.Id).kill();

    const restarting = await until(() => of(reports, 'rep_crash').find((r) => r.state === 'restarting'), 'restarting');
    expect(restarting.message).toBe('exited with code 137; restarting in 1 s');
    expect(restarting.exit_code).toBe(137);
    const again = await until(() => of(reports, 'rep_crash').filter((r) => r.state === 'running')[1], 'running again');
    const [after] = await containersOf('rep_crash');
    expect(after!.Id).not.toBe(before!.Id);
    expect((await fetch(`http://${again.endpoint}/health`)).status).toBe(200);
    expect(first.endpoint).toMatch(/^127\.0\.0\.1:\d+$/);

    // A second crash waits twice as long.
    await docker.getContainer(after!.Id).kill();
    await until(() => of(reports, 'rep_crash').filter((r) => r.state === 'restarting')[1], 'second restart');
    expect(of(reports, 'rep_crash').filter((r) => r.state === 'restarting')[1]!.message).toBe('exited with code 137; restarting in 2 s');
    await sup.stop({ taskId: 'rep_crash', kind: 'replica', timeoutMs: 0, force: true });
    expect(await containersOf('rep_crash')).toEqual([]);
  }, 40_000);

  it('reports unhealthy while the health check fails and running when it recovers', async () => {
    const { sup, reports } = supervisor();
    sup.start(order('rep_sick'));
    await until(() => of(reports, 'rep_sick').find((r) => r.state === 'running'), 'running');
    const [container] = await containersOf('rep_sick');
    await exec(container!.Id, ['rm', '/www/health']);
    const unhealthy = await until(() => of(reports, 'rep_sick').find((r) => r.state === 'unhealthy'), 'unhealthy');
    expect(unhealthy.message).toBe('health check answered HTTP 404');
    expect(unhealthy.endpoint).not.toBe('');
    await exec(container!.Id, ['sh', '-c', 'echo ok > /www/health']);
    await until(() => states(reports, 'rep_sick').lastIndexOf('running') > states(reports, 'rep_sick').indexOf('unhealthy'), 'running again');
    // Same container: failing checks alone restart nothing here (unhealthyRestartMs 0).
    expect((await containersOf('rep_sick'))[0]!.Id).toBe(container!.Id);
    await sup.stop({ taskId: 'rep_sick', kind: 'replica', timeoutMs: 0, force: true });
  }, 30_000);

  it('replaces a server that stays unhealthy past the limit', async () => {
    const { sup, reports } = supervisor({ unhealthyRestartMs: 1_000 });
    sup.start(order('rep_wedged'));
    await until(() => of(reports, 'rep_wedged').find((r) => r.state === 'running'), 'running');
    const [container] = await containersOf('rep_wedged');
    await exec(container!.Id, ['rm', '/www/health']);
    const restarting = await until(() => of(reports, 'rep_wedged').find((r) => r.state === 'restarting'), 'restarting');
    expect(restarting.message).toMatch(/^unhealthy for 1 s \(health check answered HTTP 404\); restarting in 1 s$/);
    await until(() => states(reports, 'rep_wedged').lastIndexOf('running') > states(reports, 'rep_wedged').indexOf('restarting'), 'running again');
    await sup.stop({ taskId: 'rep_wedged', kind: 'replica', timeoutMs: 0, force: true });
  }, 30_000);

  it('keeps retrying a server that cannot be started, with the reason, until stopped', async () => {
    const { sup, reports } = supervisor();
    sup.start(order('rep_noimage', '127.0.0.1:5000/svc/does-not-exist:1'));
    const restarting = await until(() => of(reports, 'rep_noimage').find((r) => r.state === 'restarting'), 'restarting');
    expect(restarting.message).toMatch(/^could not start: pull failed: .*; restarting in 1 s$/);
    await until(() => of(reports, 'rep_noimage').filter((r) => r.state === 'restarting').length >= 2, 'a second attempt');
    await sup.stop({ taskId: 'rep_noimage', kind: 'replica', timeoutMs: 0, force: true });
    expect(states(reports, 'rep_noimage').slice(-2)).toEqual(['stopping', 'gone']);
  }, 30_000);

  it('re-adopts a running replica after an agent restart: same container, same endpoint, running in Hello', async () => {
    const first = supervisor();
    first.sup.start(order('rep_keep'));
    const running = await until(() => of(first.reports, 'rep_keep').find((r) => r.state === 'running'), 'running');
    const [container] = await containersOf('rep_keep');
    first.sup.detach();

    const second = supervisor();
    const recovered = await second.sup.recover();
    expect(recovered).toMatchObject([{ task_id: 'rep_keep', kind: 'REPLICA', state: 'running', endpoint: running.endpoint }]);
    expect(second.sup.runningTasks()).toMatchObject([{ task_id: 'rep_keep', state: 'running', endpoint: running.endpoint }]);
    expect((await containersOf('rep_keep')).map((c) => c.Id)).toEqual([container!.Id]);

    // Still supervised: a crash is restarted from the spec kept on the container.
    await docker.getContainer(container!.Id).kill();
    await until(() => of(second.reports, 'rep_keep').find((r) => r.state === 'running'), 'running after the restart');
    expect(of(second.reports, 'rep_keep').map((r) => r.state)).toContain('restarting');
    await second.sup.stop({ taskId: 'rep_keep', kind: 'replica', timeoutMs: 0, force: true });
    expect(await containersOf('rep_keep')).toEqual([]);
  }, 40_000);
});
