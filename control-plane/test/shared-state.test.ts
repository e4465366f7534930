// Three control planes on one PostgreSQL database, as three replicas behind a load
// balancer: nothing a tenant or an operator relies on may live in one of them.
// - a key's rate limit is one limit across replicas (1,300 requests, 1,200 admitted),
//   token-spending requests (their slot and tokens in one statement) counted once each;
// - a key revoked or rotated through one replica is refused by the others within 1 s,
//   although their key caches never expire here (the shared clock stands still: only
//   the change notice can evict);
// - a replica marked running through one replica is routable from the others;
// - one replica leads (the gauge says which); when it goes, another takes over and runs
//   reservation expiry and webhook delivery, and every webhook arrives exactly once,
//   verified by a real standardwebhooks receiver.
import { ManualClock } from '@svc/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OrgRecord } from '../src/store/records.js';
import { LEADER_LOCK } from '../src/store/postgres/advisory-leadership.js';
import { replicaRecord } from '../src/replicas/replica-record-fixture.js';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.js';
import { addReadyNode, expectError } from './harness.js';
import { closePgReplicas, startPgReplica, type PgReplica } from './pg-replica.js';
import { until, WebhookReceiver } from './webhooks-support.js';

const LIMIT = 1_200;
const TOKEN_LIMIT = 10_000;
/** What the docs promise for a revoke or rotation to reach every replica. */
const PROPAGATION_MS = 1_000;

type Replica = PgReplica;

let server: TestPostgres;
let url: string;
let org: OrgRecord;
let admin: string;
const clock = new ManualClock(Date.now());
const replicas: Replica[] = [];
const receiver = new WebhookReceiver();

function startReplica(): Promise<Replica> {
  return startPgReplica(
    url,
    {
      rateLimitTier2: LIMIT,
      tokenLimitTier2: TOKEN_LIMIT,
      webhookPollMs: 100,
      webhookRetrySchedule: ['0s', '5s'],
      webhookAllowedTargets: ['127.0.0.1'],
      // The leader's reconciler stops replicas nobody asked for (these replicas want none),
      // and the directory test writes one by hand: left to run every second, it sometimes
      // stopped that one between its create and its start, and the test waited in vain.
      replicaReconcileMs: 60_000,
    },
    { clock },
  );
}

async function call(replica: Replica, method: string, path: string, key: string, body?: unknown) {
  const res = await fetch(replica.baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
}

async function newKey(): Promise<{ id: string; value: string }> {
  const res = await call(replicas.find((r) => !r.closed)!, 'POST', '/v1/admin/keys', admin, { name: 'tenant' });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.key_id, value: res.body.key };
}

/** Polls until every replica in `on` refuses `key` with 401; returns the ms that took. */
async function refusedEverywhere(on: Replica[], key: string): Promise<number> {
  const started = Date.now();
  await until(
    'the other replicas to refuse the key',
    async () => (await Promise.all(on.map((r) => call(r, 'GET', '/v1/models', key)))).every((res) => res.status === 401),
    10_000,
  );
  return Date.now() - started;
}

beforeAll(async () => {
  server = await startPostgres();
  url = await server.createDatabase();
  // One by one, as replicas come up behind a load balancer; the first to start leads.
  for (let i = 0; i < 3; i++) replicas.push(await startReplica());
  org = (await replicas[0]!.app.services.orgs.ensureDefaultOrg()).org;
  admin = (await replicas[0]!.app.services.keys.create({ orgId: org.id, admin: true })).value;
  await receiver.listen();
}, 60_000);

afterAll(async () => {
  await closePgReplicas(replicas);
  await receiver.stop();
  await server?.stop();
});

describe('rate limits', () => {
  const EMBEDDING = { model: 'bge-m3', input: 'x' };
  /** The i-th request of a mix: a plain route, or one that spends tokens (its slot and tokens in one statement). */
  const mixed = (i: number, key: string) =>
    i % 2 ? call(replicas[i % 3]!, 'POST', '/v1/embeddings', key, EMBEDDING) : call(replicas[i % 3]!, 'GET', '/v1/models', key);

  it(`1,300 requests spread over 3 replicas with a limit of ${LIMIT}/min admit exactly ${LIMIT}, token-spending ones among them`, async () => {
    const key = await newKey();
    const statuses: number[] = [];
    let last429: Awaited<ReturnType<typeof call>> | undefined;
    // 30 in flight at a time, round-robin over the replicas; every other one an embeddings
    // request, which no model server answers here (409 no_capacity) but which took its slot.
    for (let sent = 0; sent < 1_300; sent += 30) {
      const batch = Array.from({ length: Math.min(30, 1_300 - sent) }, (_, i) => mixed(sent + i, key.value));
      for (const res of await Promise.all(batch)) {
        statuses.push(res.status);
        if (res.status === 429) last429 = res;
      }
    }
    expect(statuses.filter((s) => s !== 429)).toHaveLength(LIMIT);
    expect(statuses.filter((s, i) => s !== 429 && s !== (i % 2 ? 409 : 200))).toEqual([]);
    expect(statuses.filter((s) => s === 429)).toHaveLength(100);
    // The same answer a single process gives: OpenAI's headers and the envelope.
    expect(expectError(last429!, 429, 'rate_limited').message).toContain('requests per minute');
    expect(last429!.headers.get('x-ratelimit-limit-requests')).toBe(String(LIMIT));
    expect(last429!.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(Number(last429!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    // Time refills the one shared bucket: a second buys 20 requests, whichever replica serves them.
    clock.advance(1_000);
    const after = await Promise.all(Array.from({ length: 30 }, (_, i) => mixed(i, key.value)));
    expect(after.filter((r) => r.status !== 429)).toHaveLength(LIMIT / 60);
  }, 60_000);

  it('a token-spending request takes one request slot and its tokens once, whichever replica serves it', async () => {
    const key = await newKey();
    const remaining: [string | null, string | null][] = [];
    for (let i = 0; i < 6; i++) {
      const res = await call(replicas[i % 3]!, 'POST', '/v1/embeddings', key.value, EMBEDDING);
      expectError(res, 409, 'no_capacity');
      remaining.push([res.headers.get('x-ratelimit-remaining-requests'), res.headers.get('x-ratelimit-remaining-tokens')]);
    }
    // Each estimate (the body's size / 4) comes back when its request ends without usage,
    // written a little later: the token count never falls by more than one estimate.
    const estimate = Math.ceil(JSON.stringify(EMBEDDING).length / 4);
    expect(remaining.map(([requests]) => requests)).toEqual(['1199', '1198', '1197', '1196', '1195', '1194']);
    for (const [, tokens] of remaining) expect(Number(tokens)).toBeGreaterThanOrEqual(TOKEN_LIMIT - 6 * estimate);
    expect(Number(remaining[0]![1])).toBe(TOKEN_LIMIT - estimate);
  });

  it('a key busy on every replica is admitted from leases of its allowance: far fewer statements than requests, and what a replica leaves unused goes back', async () => {
    const key = await newKey();
    const start = clock.now();
    const statements = replicas.map(() => 0);
    const restore = replicas.map((r, i) => {
      const query = r.store.pool.query.bind(r.store.pool);
      r.store.pool.query = ((...args: Parameters<typeof query>) => {
        const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text;
        if (text?.includes('svc_take_limits')) statements[i]!++;
        return (query as (...a: unknown[]) => unknown)(...args);
      }) as typeof query;
      return () => (r.store.pool.query = query);
    });
    try {
      const statuses: number[] = [];
      for (let sent = 0; sent < 300; sent += 30) {
        const batch = Array.from({ length: 30 }, (_, i) => call(replicas[(sent + i) % 3]!, 'POST', '/v1/embeddings', key.value, EMBEDDING));
        statuses.push(...(await Promise.all(batch)).map((r) => r.status));
      }
      expect(statuses.every((s) => s === 409)).toBe(true); // admitted; no model server here
      const total = statements.reduce((a, b) => a + b, 0);
      expect(total).toBeLessThan(60); // 100 without leases (10 in flight per replica, batched)
    } finally {
      for (const undo of restore) undo();
    }
    // A second on, each replica's unused slots are back in the one allowance. The row,
    // once every block is back, holds exactly the 300 slots spent (the clock stood still
    // during the burst). A block whose ask was still on its way when the clock moved was
    // granted at the new time and expires a second after that: the clock moves on again.
    const spentTo = start + 300 * (60_000 / LIMIT);
    const tat = async () => Number((await replicas[0]!.store.pool.query("SELECT tat FROM rate_limits WHERE key_id = $1 AND kind = 'requests'", [key.id])).rows[0]?.tat);
    let moved = 0;
    await until('every replica to give back its unused slots', async () => {
      if (Math.abs((await tat()) - spentTo) < 0.01) return true;
      if (Date.now() - moved > 1_000) {
        clock.advance(1_001);
        moved = Date.now();
      }
      return false;
    }, 10_000);
    // 300 spent, what the elapsed time refilled (20 a second), and this request's own slot.
    const refilled = Math.floor(((clock.now() - start) * LIMIT) / 60_000);
    const res = await call(replicas[0]!, 'GET', '/v1/models', key.value);
    expect(res.headers.get('x-ratelimit-remaining-requests')).toBe(String(LIMIT - 300 + refilled - 1));
  });

  it('a limit that cannot be checked refuses the request with 503 and retry-after, never admits it or answers 500', async () => {
    const key = await newKey();
    const db = replicas[0]!.store.pool;
    // Every write to the limits now fails, as with a database that refuses them.
    await db.query('ALTER TABLE rate_limits ADD CONSTRAINT refuse_all CHECK (tat < 0) NOT VALID');
    try {
      const res = await call(replicas[1]!, 'GET', '/v1/models', key.value);
      expectError(res, 503, 'service_unavailable');
      expect(res.headers.get('retry-after')).toBe('1');
      // A token-spending request takes both limits in one statement: refused the same way.
      const spending = await call(replicas[2]!, 'POST', '/v1/embeddings', key.value, EMBEDDING);
      expectError(spending, 503, 'service_unavailable');
      expect(spending.headers.get('retry-after')).toBe('1');
    } finally {
      await db.query('ALTER TABLE rate_limits DROP CONSTRAINT refuse_all');
    }
    expect((await call(replicas[1]!, 'GET', '/v1/models', key.value)).status).toBe(200);
  });

  it('tokens per minute are one allowance across replicas, and a settlement on one returns tokens to all', async () => {
    const key = await newKey();
    const limiter = (i: number) => replicas[i]!.app.services.tokenLimiter;
    // As a token-spending route takes them: its request slot and its estimate together.
    const take = async (i: number, requestId: string, estimate: number) =>
      (await limiter(i).takeWithRequest(replicas[i]!.app.services.rateLimiter, key.id, requestId, 2, estimate)).tokens;
    expect(await take(0, 'req_a', 9_000)).toMatchObject({ allowed: true, remaining: 1_000 });
    // Another replica sees the same allowance: 2,000 more do not fit.
    expect(await take(1, 'req_b', 2_000)).toMatchObject({ allowed: false, remaining: 0 });
    // The first request used 1,000 of its 9,000: the rest comes back, written for every replica.
    limiter(0).settle(key.id, 'req_a', 1_000);
    await limiter(0).flush();
    expect(await take(2, 'req_c', 2_000)).toMatchObject({ allowed: true, remaining: 7_000 });
  });
});

describe('key changes reach every replica', () => {
  it('a key revoked through replica 2 is refused by replicas 1 and 3 within 1 s', async () => {
    const key = await newKey();
    // Every replica has the key cached (and the stopped clock never expires the cache).
    for (const r of replicas) expect((await call(r, 'GET', '/v1/models', key.value)).status).toBe(200);
    const revoked = await call(replicas[1]!, 'POST', `/v1/admin/keys/${key.id}/revoke`, admin);
    expect(revoked.status, revoked.text).toBe(200);
    expect(await refusedEverywhere([replicas[0]!, replicas[2]!], key.value)).toBeLessThanOrEqual(PROPAGATION_MS);
    expectError(await call(replicas[0]!, 'GET', '/v1/models', key.value), 401, 'unauthorized');
  });

  it('a key rotated through replica 3 without overlap: the old value is refused by replicas 1 and 2 within 1 s, the new one works', async () => {
    const key = await newKey();
    for (const r of replicas) expect((await call(r, 'GET', '/v1/models', key.value)).status).toBe(200);
    const rotated = await call(replicas[2]!, 'POST', `/v1/admin/keys/${key.id}/rotate`, admin, { overlap_seconds: 0 });
    expect(rotated.status, rotated.text).toBe(200);
    expect(await refusedEverywhere([replicas[0]!, replicas[1]!], key.value)).toBeLessThanOrEqual(PROPAGATION_MS);
    for (const r of replicas) expect((await call(r, 'GET', '/v1/models', rotated.body.key)).status).toBe(200);
  });
});

describe('instances', () => {
  it('creates placed at the same moment through two replicas all get GPUs while GPUs are free, none of them shared', async () => {
    const [one, two] = replicas;
    const nodes = [await addReadyNode({ app: one!.app, store: one!.store, clock } as never), await addReadyNode({ app: one!.app, store: one!.store, clock } as never)];
    await one!.app.services.orgs.update(org.id, { gpuQuota: 64 });
    const creates = await Promise.all(
      Array.from({ length: 12 }, (_, i) => call(i % 2 ? two! : one!, 'POST', '/v1/instances', admin, { sku: 'h100-80gb', gpus: 1, pool: 'na' })),
    );
    // They all chose the same free GPUs at first; only one claim of a GPU wins, and the others place again.
    expect(creates.map((c) => c.status)).toEqual(Array.from({ length: 12 }, () => 201));
    const held = new Set((await one!.store.instances.claimedGpuUuids()));
    expect(held.size).toBe(12);
    expect(nodes.flatMap((n) => n.gpuUuids).filter((u) => held.has(u))).toHaveLength(12);
    for (const c of creates) await call(one!, 'POST', `/v1/instances/${c.body.id}/terminate`, admin, { force: true });
  });
});

describe('replica directory', () => {
  it('a model server marked running through replica 2 is routable from replicas 1 and 3', async () => {
    const { nodeId, gpuUuids } = await addReadyNode({ app: replicas[1]!.app, store: replicas[1]!.store, clock } as never, { gpus: 1 });
    const record = replicaRecord('rep_shared_1', { nodeId, gpuUuids, status: 'scheduled', endpoint: null, createdAt: clock.now(), readyAt: null, changedAt: clock.now() });
    await replicas[1]!.store.replicas.create(record);
    await replicas[1]!.store.replicas.update(record.id, 'scheduled', { status: 'running', endpoint: '127.0.0.1:9', readyAt: clock.now(), changedAt: clock.now() });
    const routable = (r: Replica) => r.app.services.replicaDirectory.ready({ model: 'tiny-chat' }).some((live) => live.id === record.id);
    await until('the other replicas to list the replica', () => routable(replicas[0]!) && routable(replicas[2]!), 10_000);
    await replicas[1]!.store.replicas.update(record.id, 'running', { status: 'stopped', endedAt: clock.now(), changedAt: clock.now() });
    await until('the other replicas to drop the replica', () => !routable(replicas[0]!) && !routable(replicas[2]!), 10_000);
  });
});

describe('leadership', () => {
  const leaderGauge = async (r: Replica) => {
    const text = await (await fetch(`${r.baseUrl}/metrics`)).text();
    return Number(/^svc_control_plane_leader (\d+)$/m.exec(text)?.[1]);
  };

  it('one replica leads; when it goes, another runs reservation expiry and webhook delivery, each webhook delivered once', async () => {
    // Exactly one leads (the first started, unless a busy moment moved the lock since).
    const gauges = await Promise.all(replicas.map(leaderGauge));
    expect([...gauges].sort()).toEqual([0, 0, 1]);
    const leader = replicas[gauges.indexOf(1)]!;
    const followers = replicas.filter((r) => r !== leader);
    const subscribed = await call(followers[0]!, 'POST', '/v1/webhooks', admin, { url: receiver.url, event_types: ['*'] });
    expect(subscribed.status, subscribed.text).toBe(201);
    receiver.secrets = [subscribed.body.secret];
    const firstSeq = (await followers[0]!.store.events.list({ afterSeq: 0, limit: 10_000 })).at(-1)?.seq ?? 0;

    // Events before the leader goes, written through the followers: the leader sends them.
    for (const r of followers) {
      const key = await newKey();
      expect((await call(r, 'POST', `/v1/admin/keys/${key.id}/revoke`, admin)).status).toBe(200);
    }
    await until('the leader to deliver the first events', () => receiver.requests.length >= 2, 10_000);

    // A reservation, through a follower, due in a few seconds of the shared clock.
    await addReadyNode({ app: followers[1]!.app, store: followers[1]!.store, clock } as never, { gpus: 1 });
    const created = await call(followers[1]!, 'POST', '/v1/instances', admin, { sku: 'h100-80gb', gpus: 1, duration_hours: 1 });
    expect(created.status, created.text).toBe(201);
    // Running, as its agent would report (a reservation that ends before it is ready fails
    // instead), from the node it was placed on (an earlier test's nodes may have room too).
    const placed = (await followers[1]!.store.instances.get(created.body.id))!;
    await followers[1]!.app.services.instances.onTaskState(placed.nodeId!, created.body.id, 'running', {});
    expect((await followers[1]!.store.instances.get(created.body.id))!.status).toBe('ready');
    // The API sells whole hours; the test cannot wait one, so the stored expiry is brought forward.
    await followers[1]!.store.pool.query('UPDATE instances SET expires_at = $1 WHERE id = $2', [clock.now() + 5_000, created.body.id]);

    // The leader goes; the followers take over within a few seconds.
    await leader.app.close();
    await leader.store.close();
    leader.closed = true;
    await until('a follower to lead', async () => (await Promise.all(followers.map(leaderGauge))).includes(1), 10_000);
    expect((await Promise.all(followers.map(leaderGauge))).sort()).toEqual([0, 1]);

    // The reservation expires on the new leader, and more events go out through it.
    clock.advance(6_000);
    await until('the reservation to expire', async () => (await call(followers[0]!, 'GET', `/v1/instances/${created.body.id}`, admin)).body.status === 'draining', 10_000);
    const key = await newKey();
    expect((await call(followers[1]!, 'POST', `/v1/admin/keys/${key.id}/revoke`, admin)).status).toBe(200);

    const events = await followers[0]!.store.events.list({ afterSeq: firstSeq, limit: 10_000 });
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['key.revoked', 'instance.lifecycle']));
    await until('every event to be delivered', () => events.every((e) => receiver.requests.some((r) => r.event.id === e.id)), 10_000);
    // Nothing twice: one request per event, each verified with the subscription's secret.
    const delivered = receiver.requests.map((r) => r.event.id).sort();
    expect(delivered).toEqual(events.map((e) => e.id).sort());
    for (const request of receiver.requests) expect(request.verifiedWith).toEqual([subscribed.body.secret]);
    // One expiry: a single transition to draining.
    const drained = events.filter((e) => e.type === 'instance.lifecycle' && e.subject === created.body.id && (e.data as { status?: string }).status === 'draining');
    expect(drained).toHaveLength(1);
  }, 60_000);

  it('a leader whose database connection is cut steps down, and the lock is held again within seconds', async () => {
    const live = replicas.filter((r) => !r.closed);
    const db = live[0]!.store.pool;
    const holder = async () =>
      (await db.query(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted`, [LEADER_LOCK])).rows.map((r) => r.pid as number);
    const [cut] = await holder();
    await db.query('SELECT pg_terminate_backend($1)', [cut]);
    await until('a new session to hold the leader lock', async () => {
      const now = await holder();
      return now.length === 1 && now[0] !== cut;
    }, 10_000);
    // Exactly one replica says it leads: the one whose session holds the lock.
    await until('the gauges to agree', async () => (await Promise.all(live.map(leaderGauge))).reduce((a, b) => a + b, 0) === 1, 10_000);
  });
});
