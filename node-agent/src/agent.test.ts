// The agent against a fake control plane: a real gRPC server in this process, the real
// agent session, and the fake libnvidia-ml built from C (loaded through koffi).
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '@svc/proto';
import { createLogger, systemClock } from '@svc/shared';
import { createFakeNvmlFixture, type FakeNvmlFixture } from 'node-nvml-bindings';
import { startAgent, type RunningAgent } from './agent.js';
import { loadAgentConfig } from './config/agent-config.js';
import { readIdentity, writeIdentity } from './identity/identity-store.js';
import { SessionRefusedError } from './session/session-errors.js';
import { FakeControlPlane } from './testing/fake-control-plane.js';
import { TEST_MAX_CONNECTIONS } from '../../test/support/node-agent-process.js';
import { REGISTRY } from '../../test/support/images.js';

const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'agent-test');
let fixture: FakeNvmlFixture;
const running: RunningAgent[] = [];
const planes: FakeControlPlane[] = [];

beforeAll(async () => {
  fixture = await createFakeNvmlFixture({ gpus: [{ uuid: 'GPU-aaaa' }, { uuid: 'GPU-bbbb', temperatureC: 50 }] });
});
afterAll(() => fixture.dispose());
afterEach(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
  await Promise.all(planes.splice(0).map((p) => p.stop()));
});

async function plane(options: ConstructorParameters<typeof FakeControlPlane>[0] = {}): Promise<FakeControlPlane> {
  const p = await new FakeControlPlane(options).start();
  planes.push(p);
  return p;
}

async function agent(cp: FakeControlPlane, env: Record<string, string> = {}, dataDir = mkdtempSync(join(tmpdir(), 'agent-')), logger = log) {
  const config = loadAgentConfig({
    SVC_CONTROL_PLANE: cp.address,
    SVC_NODE_TOKEN: 'good-token',
    SVC_AGENT_DATA_DIR: dataDir,
    SVC_NVML_LIBRARY: fixture.libraryPath,
    SVC_AGENT_HOSTNAME: 'gpu-host-1',
    SVC_POOL: 'eu',
    SVC_SSH_PORT: '0',
    SVC_JUPYTER_PORT: '0',
    SVC_PULL_PROXY_PORT: '0',
    SVC_ACCESS_BIND_HOST: '127.0.0.1',
    // Only at a full disk: a CI machine's may be 90% full without that being the test.
    SVC_DISK_PRESSURE_PERCENT: '100',
    SVC_TASK_MAX_CONNECTIONS: String(TEST_MAX_CONNECTIONS),
    SVC_INSTANCE_PRIVATE_REGISTRIES: REGISTRY,
    ...env,
  });
  const a = await startAgent(config, { log: logger, clock: systemClock });
  running.push(a);
  return { agent: a, dataDir };
}

describe('node agent session', () => {
  it('enrolls once, says hello, and reports host facts, telemetry and heartbeats', async () => {
    const cp = await plane({ reportIntervalMs: 100 });
    const { dataDir } = await agent(cp);
    await cp.waitFor(() => cp.messagesOf('heartbeat').length >= 3, 5_000, 'three heartbeats');

    expect(cp.enrollments).toMatchObject([{ token: 'good-token', hostname: 'gpu-host-1', pool: 'eu', protocol_version: PROTOCOL_VERSION }]);
    const identity = await readIdentity(dataDir);
    expect(identity?.node_id).toBe('node_1');
    expect(cp.sessions[0]!.hello).toMatchObject({ node_id: 'node_1', node_secret: 'secret-node_1', protocol_version: PROTOCOL_VERSION, hostname: 'gpu-host-1', pool: 'eu', running_tasks: [] });

    const facts = cp.messagesOf('host_facts');
    expect(facts).toHaveLength(1);
    expect(facts[0]).toMatchObject({ hostname: 'gpu-host-1', nvml_available: true, nvidia_driver_version: expect.any(String) });
    expect(facts[0]!.cpu_cores).toBeGreaterThan(0);

    const telemetry = cp.messagesOf('telemetry').at(-1)!;
    expect(telemetry.gpus.map((g) => [g.uuid, g.healthy])).toEqual([['GPU-aaaa', true], ['GPU-bbbb', true]]);
    expect(telemetry.gpus[1]!.temperature_c).toBe(50);
    const seqs = cp.messagesOf('heartbeat').map((h) => h.seq);
    expect(seqs.slice(0, 3)).toEqual([1, 2, 3]);
  });

  it('reports at the interval the control plane sets, and changes it when told', async () => {
    const cp = await plane({ reportIntervalMs: 60_000 });
    await agent(cp);
    await cp.waitFor(() => cp.messagesOf('heartbeat').length >= 1, 5_000, 'first heartbeat');
    await new Promise((r) => setTimeout(r, 300));
    expect(cp.messagesOf('heartbeat')).toHaveLength(1); // 60 s interval: nothing more yet
    cp.current!.send({ body: 'report_interval', report_interval: { interval_ms: 100 } });
    await cp.waitFor(() => cp.messagesOf('heartbeat').length >= 4, 2_000, 'heartbeats at 100 ms');
  });

  it('pushes a critical XID at once, XID 13 only as a timeline entry, and recovers on ResetGpuHealth', async () => {
    const cp = await plane({ reportIntervalMs: 60_000 });
    await agent(cp);
    await cp.waitFor(() => cp.messagesOf('telemetry').length >= 1, 5_000, 'telemetry');

    fixture.state.injectXid(0, 13);
    fixture.state.injectXid(1, 79);
    const started = Date.now();
    const event = await cp.waitFor(() => cp.messagesOf('health_event').find((e) => e.xid === 79), 3_000, 'the XID 79 health event');
    expect(Date.now() - started).toBeLessThan(3_000); // far sooner than the 60 s report interval
    expect(event).toMatchObject({
      gpu_uuid: 'GPU-bbbb',
      gpu_index: 1,
      kind: 'XID',
      xid: 79,
      healthy: false,
      message: 'XID 79: GPU has fallen off the bus; recommended action: reboot the node (RESTART_BM)',
    });
    // XID 13 is the application's fault: on the timeline, GPU 0 stays healthy.
    const app = await cp.waitFor(() => cp.messagesOf('health_event').find((e) => e.xid === 13), 3_000, 'the XID 13 health event');
    expect(app).toMatchObject({ gpu_uuid: 'GPU-aaaa', kind: 'XID', healthy: true });
    expect(app.message).toContain('RESTART_APP');
    expect(cp.messagesOf('health_event')).toHaveLength(2);

    cp.current!.send({ body: 'command', command: { command_id: 'cmd-1', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: 'GPU-bbbb' } } });
    const result = await cp.waitFor(() => cp.messagesOf('command_result')[0], 3_000, 'command result');
    expect(result).toMatchObject({ command_id: 'cmd-1', ok: true });
    const recovered = await cp.waitFor(() => cp.messagesOf('health_event').find((e) => e.kind === 'RECOVERED'), 3_000, 'the recovery');
    expect(recovered).toMatchObject({ gpu_uuid: 'GPU-bbbb', kind: 'RECOVERED', healthy: true });

    // A task order is accepted at once; an invalid one then reports failed with the reason.
    cp.current!.send({ body: 'command', command: { command_id: 'cmd-2', body: 'start_task', start_task: { task_id: 'inst_t1', image: '' } } });
    const accepted = await cp.waitFor(() => cp.messagesOf('command_result')[1], 3_000, 'second command result');
    expect(accepted).toMatchObject({ command_id: 'cmd-2', ok: true });
    const failed = await cp.waitFor(() => cp.messagesOf('task_state').find((s) => s.state === 'failed'), 5_000, 'failed task state');
    expect(failed).toMatchObject({ task_id: 'inst_t1', kind: 'INSTANCE' });
    expect(failed.message).toContain('invalid task');
  });

  it('under disk pressure, reports it in its host facts and refuses a new instance before pulling anything', async () => {
    const cp = await plane({ reportIntervalMs: 100 });
    // 1%: this host's disk holding Docker data counts as nearly full.
    await agent(cp, { SVC_DISK_PRESSURE_PERCENT: '1' });
    const facts = await cp.waitFor(() => cp.messagesOf('host_facts')[0], 5_000, 'host facts');
    expect(facts).toMatchObject({ disk_pressure: true, docker_disk: { mount: expect.any(String) } });
    expect(Number(facts.docker_disk!.files_total)).toBeGreaterThan(0);

    const image = '127.0.0.1:5000/svc/never-pulled:1';
    cp.current!.send({ body: 'command', command: { command_id: 'cmd-p', body: 'start_task', start_task: { task_id: 'inst_p1', kind: 'INSTANCE', image } } });
    const failed = await cp.waitFor(() => cp.messagesOf('task_state').find((t) => t.task_id === 'inst_p1' && t.state === 'failed'), 5_000, 'the refusal');
    expect(failed.message).toMatch(/^this node's disk is nearly full \(\d+% of its bytes and \d+% of its files in use, past 1%\): the instance was not started$/);
    // Refused before the pull: it never reported pulling.
    expect(cp.messagesOf('task_state').filter((t) => t.task_id === 'inst_p1').map((t) => t.state)).toEqual(['failed']);
  });

  it('reconnects after a control plane restart as the same node, without enrolling again', async () => {
    const cp = await plane({ reportIntervalMs: 100 });
    await agent(cp);
    await cp.waitFor(() => cp.sessions.length === 1 && cp.messagesOf('heartbeat').length >= 1, 5_000, 'first session');
    await cp.stop();
    await new Promise((r) => setTimeout(r, 300));
    await cp.start(); // same port
    await cp.waitFor(() => cp.sessions.length === 2, 8_000, 'a second session');
    expect(cp.sessions[1]!.hello.node_id).toBe('node_1');
    expect(cp.enrollments).toHaveLength(1);
    await cp.waitFor(() => cp.sessions[1]!.messages.some((m) => m.body === 'host_facts'), 3_000, 'host facts again');
  });

  it('gives up a session whose heartbeats go unacknowledged, and reconnects', async () => {
    const cp = await plane({ reportIntervalMs: 100, ackHeartbeats: false });
    await agent(cp);
    await cp.waitFor(() => cp.sessions.length >= 2, 6_000, 'a second session after the ack deadline');
    expect(cp.sessions[0]!.ended).toBe(true);
    expect(cp.sessions.map((s) => s.hello.node_id)).toEqual(['node_1', 'node_1']);
  });

  it('a restarted agent reuses its stored identity', async () => {
    const cp = await plane();
    const first = await agent(cp);
    await cp.waitFor(() => cp.sessions.length === 1, 5_000, 'first session');
    await first.agent.stop();
    await agent(cp, { SVC_NODE_TOKEN: '' }, first.dataDir);
    await cp.waitFor(() => cp.sessions.length === 2, 5_000, 'second session');
    expect(cp.sessions.map((s) => s.hello.node_id)).toEqual(['node_1', 'node_1']);
    expect(cp.enrollments).toHaveLength(1);
  });

  it('stops with the control plane message when the token is refused', async () => {
    const cp = await plane();
    const { agent: a } = await agent(cp, { SVC_NODE_TOKEN: 'bad-token' });
    await expect(a.done).rejects.toThrow(SessionRefusedError);
    await expect(a.done).rejects.toThrow('enrollment refused: unknown, used or revoked enrollment token (UNAUTHENTICATED)');
  });

  it('stops with what to do when there is neither identity nor token', async () => {
    const cp = await plane();
    const { agent: a } = await agent(cp, { SVC_NODE_TOKEN: '' });
    await expect(a.done).rejects.toThrow(/no node identity .* and no enrollment token: .*svcctl nodes token create.*SVC_NODE_TOKEN/);
    expect(cp.enrollments).toHaveLength(0);
  });

  it('stops when the control plane does not know its stored identity', async () => {
    const cp = await plane();
    const dataDir = mkdtempSync(join(tmpdir(), 'agent-'));
    await writeIdentity(dataDir, { node_id: 'node_gone', node_secret: 'x', control_plane: cp.address, enrolled_at: '' });
    const { agent: a } = await agent(cp, {}, dataDir);
    await expect(a.done).rejects.toThrow('the control plane refused this node: unknown node node_gone (UNAUTHENTICATED)');
    expect(cp.enrollments).toHaveLength(0);
  });

  it('will not run tenants without its host firewall: stops before anything opens, saying what to do', async () => {
    const cp = await plane();
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent'; // no iptables to be found
    try {
      const err = await agent(cp).then(
        () => new Error('expected the agent to refuse to start'),
        (e: unknown) => e as Error,
      );
      expect(err.name).toBe('ConfigError');
      expect(err.message).toMatch(/cannot install the host firewall.*SVC_HOST_FIREWALL=false.*iptables/);
    } finally {
      process.env.PATH = path;
    }
    expect(cp.enrollments).toEqual([]);
  });

  it('will not run tenants without its log limiter: stops before anything opens when it cannot compile it', async () => {
    const cp = await plane();
    const cc = process.env.CC;
    process.env.CC = '/nonexistent/cc';
    try {
      const err = await agent(cp).then(
        () => new Error('expected the agent to refuse to start'),
        (e: unknown) => e as Error,
      );
      expect(err.name).toBe('ConfigError');
      expect(err.message).toMatch(/building the log limiter with \/nonexistent\/cc failed \(it needs a C compiler and a static libc.*SVC_TASK_LOG_BYTES_PER_SECOND=0/);
    } finally {
      if (cc === undefined) delete process.env.CC;
      else process.env.CC = cc;
    }
    expect(cp.enrollments).toEqual([]);
    // Turned off, it starts (and says what that costs, in its log and to the control plane).
    const { agent: a } = await agent(cp, { SVC_TASK_LOG_BYTES_PER_SECOND: '0' });
    await cp.waitFor(() => cp.sessions.length === 1, 5_000, 'session');
    const facts = await cp.waitFor(() => cp.messagesOf('host_facts')[0], 5_000, 'host facts');
    expect(facts.isolation_warnings).toContain('no_log_limit');
    await a.stop();
  });

  it("runs the pull proxy while it runs, and says at start when dockerd does not pull through it", async () => {
    const cp = await plane();
    const lines: Array<{ msg: string; pull_proxy?: string }> = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()));
        done();
      },
    });
    // The tests' dockerd has no proxy set.
    const { agent: a } = await agent(cp, {}, undefined, createLogger('info', 'agent-test', sink, 'json'));
    const warning = lines.find((l) => l.msg.includes("HTTP_PROXY and HTTPS_PROXY are not the agent's pull proxy"));
    expect(warning?.pull_proxy).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const port = Number(new URL(warning!.pull_proxy!).port);
    // The control plane hears it too, with the host facts.
    const facts = await cp.waitFor(() => cp.messagesOf('host_facts')[0], 5_000, 'host facts');
    expect(facts.isolation_warnings).toContain('pulls_bypass_proxy');
    expect(facts.isolation_warnings).not.toContain('no_host_firewall');
    expect(facts.isolation_warnings).not.toContain('no_log_limit');

    const socket = connect(port, '127.0.0.1');
    socket.write('CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: 169.254.169.254:80\r\n\r\n');
    const [answer] = (await once(socket, 'data')) as [Buffer];
    expect(answer.toString().split('\r\n')[0]).toBe('HTTP/1.1 403 Refused by the node: 169.254.169.254 is not on a public address (link-local)');
    socket.destroy();

    await a.stop();
    const closed = connect(port, '127.0.0.1');
    const [err] = (await once(closed, 'error')) as [NodeJS.ErrnoException];
    expect(err.code).toBe('ECONNREFUSED');
  });

  it('closes the stream on stop', async () => {
    const cp = await plane();
    const { agent: a } = await agent(cp);
    await cp.waitFor(() => cp.sessions.length === 1, 5_000, 'session');
    await a.stop();
    await cp.waitFor(() => cp.sessions[0]!.ended, 2_000, 'the stream to end');
  });
});
