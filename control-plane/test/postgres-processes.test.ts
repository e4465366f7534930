// The control plane and svcctl as real processes on one PostgreSQL database:
// - two control planes started together on an empty database both come up (migrations
//   and the first org are raced for, not duplicated), a key svcctl creates works on both,
//   and neither prints the database password;
// - an idempotency key sent to one process and, while that one still runs, to the other:
//   the second waits for the first and replays its answer; the work is done once;
// - SIGKILL of the leader process: the other leads within seconds and resumes reservation
//   expiry and webhook delivery (a real `standardwebhooks` receiver): every event arrives,
//   none twice, and the expired reservation is stopped once.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildServices, type Services } from '../src/app.js';
import { loadControlPlaneConfig } from '../src/config.js';
import { openPostgresStore, type PostgresStore } from '../src/store/postgres/postgres-store.js';
import { spawnControlPlane, type ControlPlaneProcess } from '../../test/support/control-plane-process.js';
import { freePort, ROOT } from '../../test/support/node-agent-process.js';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.js';
import { enroll, FakeSession, gatewayClient, gpuSample, hello } from './fake-agent.js';
import { until, WebhookReceiver } from './webhooks-support.js';

const exec = promisify(execFile);
const REPLAY_HEADER = 'x-service-idempotent-replay';
let server: TestPostgres;
let url: string;
let dir: string;
const planes: ControlPlaneProcess[] = [];
/** The agent gRPC port of each of `planes`, in the same order. */
const grpcPorts: number[] = [];
/** The test's own connection to the database: seeds keys and tokens, reads rows and locks. */
let store: PostgresStore;
let services: Services;
let admin: string;
const receiver = new WebhookReceiver();
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  server = await startPostgres();
  // Trust authentication ignores the password; it is here to be looked for in the output.
  const created = new URL(await server.createDatabase());
  created.password = 'pw-never-printed';
  url = created.toString();
  dir = mkdtempSync(join(tmpdir(), 'svc-pgproc-'));
  const env = {
    SVC_DATABASE_URL: url,
    // No model servers: the only node here is the test's fake agent, for an instance.
    SVC_REPLICAS: 'none',
    SVC_WEBHOOK_ALLOWED_TARGETS: '127.0.0.1',
    SVC_WEBHOOK_POLL_MS: '100',
    SVC_REPORT_INTERVAL_MS: '500',
    // The fake agent reports every 500 ms; a loaded host must not turn it unreachable.
    SVC_NODE_DEADLINE_MS: '30000',
  };
  for (let i = 0; i < 2; i++) grpcPorts.push(await freePort());
  // Started together on the empty database: both race for the migrations and the first org.
  const start = (name: string, grpc: number) => spawnControlPlane({ ...env, SVC_DATA_DIR: join(dir, name), SVC_GRPC_PORT: String(grpc) });
  planes.push(...(await Promise.all([start('a', grpcPorts[0]!), start('b', grpcPorts[1]!)])));
  store = await openPostgresStore(url, { poolSize: 4 });
  services = buildServices({ config: loadControlPlaneConfig({ ...process.env, ...env, SVC_DATA_DIR: join(dir, 'test') }), store });
  const { org } = await services.orgs.ensureDefaultOrg();
  admin = (await services.keys.create({ orgId: org.id, admin: true })).value;
  await receiver.listen();
});
afterAll(async () => {
  for (const cleanup of cleanups) cleanup();
  await Promise.all(planes.map((p) => p.kill()));
  await receiver.stop();
  await store?.close();
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

async function call(plane: ControlPlaneProcess, method: string, path: string, headers: Record<string, string> = {}, body?: unknown) {
  const res = await fetch(plane.baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${admin}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
}

const leaderGauge = async (plane: ControlPlaneProcess) =>
  Number(/^svc_control_plane_leader (\d+)$/m.exec(await (await fetch(`${plane.baseUrl}/metrics`)).text())?.[1]);

/** Backends of the control planes waiting for a lock `holder` (the test's own session) holds. */
async function blockedBy(holder: number): Promise<Array<{ pid: number; xact: string }>> {
  const { rows } = await store.pool.query(
    `SELECT pid, xact_start::text AS xact FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
    [holder],
  );
  return rows as Array<{ pid: number; xact: string }>;
}

/** A transaction of the test's own holding `FOR UPDATE` on the rows `select` finds; commit() lets go. */
async function lockRows(select: string, params: unknown[]): Promise<{ pid: number; commit(): Promise<void> }> {
  const client: pg.PoolClient = await store.pool.connect();
  let open = true;
  const commit = async (): Promise<void> => {
    if (!open) return;
    open = false;
    try {
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  cleanups.push(() => void commit().catch(() => undefined));
  await client.query('BEGIN');
  const locked = await client.query(`${select} FOR UPDATE`, params);
  expect(locked.rowCount).toBe(1);
  const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
  return { pid, commit };
}

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

// The original is held inside its work by a row lock the test takes on the key it revokes
// (the revoke takes the same lock), so the duplicate provably arrives while the original
// runs; a second lock, on the claim row, catches the duplicate reading the claim. No sleeps.
it('an idempotency key sent to replica 1 and, while that request runs, to replica 2: replica 2 waits, then replays the same answer; one revoke, one event', { timeout: 60_000 }, async () => {
  const [one, two] = planes as [ControlPlaneProcess, ControlPlaneProcess];
  const target = (await services.keys.create({ orgId: (await services.orgs.ensureDefaultOrg()).org.id, name: 'revoked once' })).record;
  const idem = randomUUID();
  const revoke = (plane: ControlPlaneProcess) => call(plane, 'POST', `/v1/admin/keys/${target.id}/revoke`, { 'x-service-idempotency-key': idem });

  const keyLock = await lockRows('SELECT id FROM api_keys WHERE id = $1', [target.id]);
  const first = revoke(one);
  // Replica 1 claimed the key and is inside the revoke, waiting for the key's row.
  await until('replica 1 to wait inside its revoke', async () => (await blockedBy(keyLock.pid)).length === 1, 20_000);
  const claim = (await store.pool.query('SELECT state FROM idempotency_records WHERE idem_key = $1', [idem])).rows;
  expect(claim).toEqual([{ state: 'in_progress' }]);

  // Replica 2 gets the same request and reads the claim. It looks before its balance check,
  // with a plain read that no lock holds up (a retry of a finished request is answered
  // there), so the test sees the read in pg_stat_activity: the first read of the claim
  // since replica 1 was held is replica 2's (replica 1 only renews its lease, an UPDATE).
  const since = (await store.pool.query('SELECT clock_timestamp()::text AS t')).rows[0].t as string;
  let secondAnswered = false;
  const second = revoke(two).finally(() => (secondAnswered = true));
  const claimReads = async () =>
    (
      await store.pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'SELECT%FROM idempotency_records%' AND query_start > $1::timestamptz`,
        [since],
      )
    ).rows[0].n as number;
  await until('replica 2 to read the claim', async () => (await claimReads()) > 0, 20_000);
  // Replica 1 is still held, so what it read was `in_progress`: it now waits.
  expect(secondAnswered).toBe(false);

  // Replica 1 finishes; replica 2 answers with what replica 1 answered.
  await keyLock.commit();
  const [original, duplicate] = await Promise.all([first, second]);
  expect(original.status, original.text).toBe(200);
  expect(original.headers.get(REPLAY_HEADER)).toBeNull();
  expect(original.body).toMatchObject({ key_id: target.id, revoked: true });
  expect(duplicate.status, duplicate.text).toBe(200);
  expect(duplicate.headers.get(REPLAY_HEADER)).toBe('true');
  expect(duplicate.text).toBe(original.text);
  // Done once: one revocation event, one stored answer.
  const events = await store.pool.query(`SELECT id FROM events WHERE type = 'key.revoked' AND subject = $1`, [target.id]);
  expect(events.rowCount).toBe(1);
  expect((await store.pool.query('SELECT state FROM idempotency_records WHERE idem_key = $1', [idem])).rows).toEqual([{ state: 'completed' }]);
});

// Last: it kills one of the two. The leader's lock dies with its process; the survivor
// takes it at its next try (SVC_LEADER_RETRY_MS, 1 s), says so in its log and metrics, and
// runs what the leader ran: here reservation expiry and webhook sending. The kill comes when
// every earlier delivery is recorded as done (nothing in flight), so each event must arrive
// exactly once: an attempt in flight at a kill is the only duplicate the docs allow.
it('SIGKILL of the leader: the other process leads within seconds and resumes expiry and webhook delivery, nothing lost and nothing twice', { timeout: 120_000 }, async () => {
  const gauges = await Promise.all(planes.map(leaderGauge));
  expect([...gauges].sort()).toEqual([0, 1]);
  const leader = planes[gauges.indexOf(1)]!;
  const survivorIndex = gauges.indexOf(0);
  const survivor = planes[survivorIndex]!;

  // A node: a fake agent (the real protocol over real gRPC) whose stream the survivor holds.
  // It answers a start with `running` and a stop with `gone`, and counts the stops.
  const token = await services.enrollment.createToken({ pool: 'na' });
  const client = gatewayClient(`127.0.0.1:${grpcPorts[survivorIndex]}`);
  cleanups.push(() => client.close());
  const identity = await enroll(client, token.value);
  const agent = new FakeSession(client, hello(identity.node_id, identity.node_secret));
  cleanups.push(() => agent.close());
  await agent.next((m) => m.body === 'welcome', 20_000);
  agent.send({ telemetry: { sampled_at_ms: Date.now(), gpus: [gpuSample(0)] } });
  const stops = new Map<string, number>();
  let handled = 0;
  let ticks = 0;
  const agentTimer = setInterval(() => {
    for (; handled < agent.received.length; handled++) {
      const command = agent.received[handled]!.command;
      if (command?.start_task) agent.send({ task_state: { task_id: command.start_task.task_id, kind: 'INSTANCE', state: 'running', at_ms: Date.now() } });
      if (command?.stop_task) {
        const id = command.stop_task.task_id;
        stops.set(id, (stops.get(id) ?? 0) + 1);
        agent.send({ task_state: { task_id: id, kind: 'INSTANCE', state: 'gone', at_ms: Date.now(), stopped_at_ms: Date.now() } });
      }
    }
    if (++ticks % 10 === 0) agent.send({ heartbeat: { seq: ticks / 10, sent_at_ms: Date.now() } });
  }, 50);
  cleanups.push(() => clearInterval(agentTimer));
  await until(
    'the node to be ready with its GPU',
    async () =>
      (await store.pool.query(`SELECT 1 FROM nodes n JOIN node_gpus g ON g.node_id = n.id WHERE n.id = $1 AND n.status = 'ready'`, [identity.node_id])).rowCount === 1,
    20_000,
  );

  // Every event from here on goes to the receiver, verified with the subscription's secret.
  const subscribed = await call(survivor, 'POST', '/v1/webhooks', {}, { url: receiver.url, event_types: ['*'] });
  expect(subscribed.status, subscribed.text).toBe(201);
  receiver.secrets = [subscribed.body.secret];
  const fromSeq = Number((await store.pool.query('SELECT from_seq FROM webhook_subscriptions WHERE id = $1', [subscribed.body.id])).rows[0].from_seq);
  /** Each event since the subscription, and whether its delivery is recorded as succeeded. */
  const outbox = async () =>
    (
      await store.pool.query(
        `SELECT e.id, d.status FROM events e LEFT JOIN webhook_deliveries d ON d.event_seq = e.seq AND d.subscription_id = $1
         WHERE e.seq > $2 ORDER BY e.seq`,
        [subscribed.body.id, fromSeq],
      )
    ).rows as Array<{ id: string; status: string | null }>;
  const revokeOne = async () => {
    const key = await services.keys.create({ orgId: (await services.orgs.ensureDefaultOrg()).org.id, name: 'revoked' });
    const res = await call(survivor, 'POST', `/v1/admin/keys/${key.record.id}/revoke`);
    expect(res.status, res.text).toBe(200);
  };

  // Before the kill: a reservation started on the node, and keys revoked, through the follower.
  const created = await call(survivor, 'POST', '/v1/instances', {}, { sku: 'h100-80gb', gpus: 1, duration_hours: 1 });
  expect(created.status, created.text).toBe(201);
  const instanceId = created.body.id as string;
  await until('the instance to be ready', async () => (await call(survivor, 'GET', `/v1/instances/${instanceId}`)).body.status === 'ready', 20_000);
  await revokeOne();
  await revokeOne();
  // The leader delivered all of them and recorded it: nothing is in flight when it dies.
  await until('the leader to deliver every event so far', async () => (await outbox()).every((e) => e.status === 'succeeded'), 20_000);
  const beforeKill = (await outbox()).map((e) => e.id);
  expect(beforeKill.length).toBeGreaterThanOrEqual(4);
  expect(receiver.requests.map((r) => r.webhookId).sort()).toEqual([...beforeKill].sort());

  const killedAt = Date.now();
  await leader.kill();
  // An event while nobody leads, and the reservation falls due (the API sells whole hours;
  // the test cannot wait one, so the stored expiry is brought forward to now).
  await revokeOne();
  await store.pool.query('UPDATE instances SET expires_at = $1 WHERE id = $2', [Date.now(), instanceId]);

  const announced = await survivor.line((l) => (typeof l.msg === 'string' && l.msg.startsWith('this replica is the leader') ? l : undefined), 15_000);
  const tookOverMs = Date.now() - killedAt;
  process.stdout.write(`leader takeover after SIGKILL: ${JSON.stringify({ took_over_ms: tookOverMs })}\n`);
  expect(announced.replica).toMatch(/:\d+$/);
  expect(await leaderGauge(survivor)).toBe(1);
  expect(tookOverMs).toBeLessThan(5_000);

  // The new leader expires the reservation: one stop to the node, terminated once.
  await until('the reservation to expire and terminate', async () => (await call(survivor, 'GET', `/v1/instances/${instanceId}`)).body.status === 'terminated', 20_000);
  expect(stops.get(instanceId)).toBe(1);
  await revokeOne();

  // Every event, before and after the kill, delivered and recorded; then none twice.
  await until('every event to be delivered', async () => (await outbox()).every((e) => e.status === 'succeeded'), 20_000);
  const all = await outbox();
  expect(all.length).toBeGreaterThan(beforeKill.length);
  for (const request of receiver.requests) {
    expect(request.webhookId).toBe(request.event.id);
    expect(request.verifiedWith).toEqual([subscribed.body.secret]);
    expect(request.answered).toBe(200);
  }
  expect(receiver.requests.map((r) => r.webhookId).sort()).toEqual(all.map((e) => e.id).sort());
  const types = (ids: string[]) => ids.map((id) => receiver.requests.find((r) => r.webhookId === id)!.event.type);
  process.stdout.write(
    `webhooks across the kill: ${JSON.stringify({ before: types(beforeKill), after: types(all.map((e) => e.id).filter((id) => !beforeKill.includes(id))), requests: receiver.requests.length })}\n`,
  );

  // One expiry: one transition to draining and one to terminated, both after the kill.
  const lifecycle = (await store.events.list({ afterSeq: fromSeq, type: 'instance.lifecycle', limit: 1_000 })).filter((e) => e.subject === instanceId);
  const statuses = lifecycle.map((e) => (e.data as { status: string }).status);
  expect(statuses.filter((s) => s === 'draining')).toHaveLength(1);
  expect(statuses.filter((s) => s === 'terminated')).toHaveLength(1);
  for (const event of lifecycle.filter((e) => ['draining', 'terminated'].includes((e.data as { status: string }).status))) {
    expect(event.createdAt).toBeGreaterThanOrEqual(killedAt);
  }
});
