// The control plane and svcctl as real processes on one PostgreSQL database: two
// control planes started together on an empty database both come up (migrations and
// the first org are raced for, not duplicated), a key svcctl creates works on both, and
// neither prints the database password.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnControlPlane, type ControlPlaneProcess } from '../../test/support/control-plane-process.js';
import { freePort, ROOT } from '../../test/support/node-agent-process.js';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.js';

const exec = promisify(execFile);
let server: TestPostgres;
let url: string;
let dir: string;
const planes: ControlPlaneProcess[] = [];

beforeAll(async () => {
  server = await startPostgres();
  // Trust authentication ignores the password; it is here to be looked for in the output.
  const created = new URL(await server.createDatabase());
  created.password = 'pw-never-printed';
  url = created.toString();
  dir = mkdtempSync(join(tmpdir(), 'svc-pgproc-'));
  // Started together on the empty database: both race for the migrations and the first org.
  const start = async (name: string) => spawnControlPlane({ SVC_DATABASE_URL: url, SVC_DATA_DIR: join(dir, name), SVC_GRPC_PORT: String(await freePort()) });
  planes.push(...(await Promise.all([start('a'), start('b')])));
});
afterAll(async () => {
  await Promise.all(planes.map((p) => p.kill()));
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const svcctl = async (...args: string[]) => {
  const { stdout } = await exec(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), ...args, '--json'], {
    cwd: ROOT,
    env: { ...process.env, SVC_DATABASE_URL: url, SVC_DATA_DIR: join(dir, 'svcctl') },
  });
  return JSON.parse(stdout) as Record<string, any>;
};

// svcctl is a process of its own (tsx compiles it each time): slow on a busy host.
it('two control planes share one database: started together, one org, a key from svcctl works on both', { timeout: 120_000 }, async () => {
  const created = await svcctl('keys', 'create', '--admin');
  for (const plane of planes) {
    const res = await fetch(`${plane.baseUrl}/v1/instances`, { headers: { authorization: `Bearer ${created.key}` } });
    expect(res.status, await res.clone().text()).toBe(200);
  }
  const orgs = await svcctl('orgs', 'list');
  expect(orgs.data).toHaveLength(1);
  for (const plane of planes) expect(plane.output()).not.toContain('pw-never-printed');
});

// Last: it kills one of the two. The leader's lock dies with its process; the survivor
// takes it at its next try (SVC_LEADER_RETRY_MS, 1 s) and says so in its log and metrics.
it('SIGKILL of the leader: the other process leads within seconds, in its log and on /metrics', { timeout: 60_000 }, async () => {
  const leaderGauge = async (plane: ControlPlaneProcess) =>
    Number(/^svc_control_plane_leader (\d+)$/m.exec(await (await fetch(`${plane.baseUrl}/metrics`)).text())?.[1]);
  const gauges = await Promise.all(planes.map(leaderGauge));
  expect([...gauges].sort()).toEqual([0, 1]);
  const leader = planes[gauges.indexOf(1)]!;
  const survivor = planes[gauges.indexOf(0)]!;
  await leader.kill();
  const announced = await survivor.line((l) => (typeof l.msg === 'string' && l.msg.startsWith('this replica is the leader') ? l : undefined), 15_000);
  expect(announced.replica).toMatch(/:\d+$/);
  expect(await leaderGauge(survivor)).toBe(1);
});
