// Three control planes on one PostgreSQL database, in front of one model server that
// holds every completion until the test lets it go: what one replica of a model may be
// sent, and what one organization may hold of it, is the fleet's limit, not each control
// plane's. Each process counts the others through the seats of the leader election (real
// advisory locks) and sends its even part; when one leaves, the others take its part.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveReplica } from '../src/inference/replica-source.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.js';
import { closePgReplicas, startPgReplica, type PgReplica } from './pg-replica.js';
import { until } from './webhooks-support.js';

/** What the model server may hold from all three together; one org may hold half. */
const IN_FLIGHT = 6;
const MODEL = 'tiny-chat';

type Replica = PgReplica;

let server: TestPostgres;
let url: string;
let upstream: OpenAiUpstream;
const replicas: Replica[] = [];
const keys: Record<'a' | 'b' | 'c' | 'd', string> = { a: '', b: '', c: '', d: '' };

function startReplica(live: LiveReplica[]): Promise<Replica> {
  return startPgReplica(
    url,
    { inferenceMaxInFlight: IN_FLIGHT, inferenceMaxOrgShare: 0.5, inferenceAttempts: 1, leaderRetryMs: 200 },
    {
      replicas: {
        directory: { ready: (f = {}) => live.filter((r) => f.model === undefined || r.model === f.model) },
        plan: { desired: (model) => (live.some((r) => r.model === model) ? 1 : 0) },
      },
    },
  );
}

type Answer = { status: number; type?: string; message?: string };
async function chat(replica: Replica, key: string): Promise<Answer> {
  const res = await fetch(`${replica.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  const body = (await res.json()) as { error?: { type: string; message: string } };
  return { status: res.status, type: body.error?.type, message: body.error?.message };
}

const processesSeen = async (r: Replica) => {
  const text = await (await fetch(`${r.baseUrl}/metrics`)).text();
  return Number(/^svc_control_plane_processes (\d+)$/m.exec(text)?.[1]);
};
const live = () => replicas.filter((r) => !r.closed);
/** Completions the model server holds now: asked for and not answered yet. */
const held = () => upstream.requests.length;

/** Sends each request, waits until `admitted` reached the model server and the rest were answered. */
async function send(requests: Array<[Replica, string]>, admitted: number): Promise<{ answers: Promise<Answer[]>; refused: Answer[] }> {
  const before = held();
  const refused: Answer[] = [];
  const answers = Promise.all(
    requests.map(([r, key]) =>
      chat(r, key).then((a) => {
        if (a.status !== 200) refused.push(a);
        return a;
      }),
    ),
  );
  await until(`${admitted} of ${requests.length} requests to reach the model server and the rest to be refused`, () => held() - before >= admitted && refused.length >= requests.length - admitted, 10_000);
  return { answers, refused };
}

beforeAll(async () => {
  server = await startPostgres();
  url = await server.createDatabase();
  upstream = await startOpenAiUpstream({ name: 'held', apiKey: 'key-held' });
  upstream.mode = 'held';
  const directory: LiveReplica[] = [
    { id: 'rep_held', model: MODEL, quantization: 'int4', pool: 'na', nodeId: 'node_1', baseUrl: upstream.baseUrl, engine: 'cpu', image: 'engine:test', apiKey: 'key-held' },
  ];
  for (let i = 0; i < 3; i++) replicas.push(await startReplica(directory));
  const services = replicas[0]!.app.services;
  const orgA = (await services.orgs.ensureDefaultOrg()).org;
  keys.a = (await services.keys.create({ orgId: orgA.id })).value;
  keys.b = (await services.keys.create({ orgId: (await services.orgs.create('fleet-share-b')).id })).value;
  keys.c = (await services.keys.create({ orgId: (await services.orgs.create('fleet-share-c')).id })).value;
  keys.d = (await services.keys.create({ orgId: (await services.orgs.create('fleet-share-d')).id })).value;
}, 60_000);

afterAll(async () => {
  upstream?.release();
  await closePgReplicas(replicas);
  await upstream?.close();
  await server?.stop();
});

describe("a model server's in-flight limit across control planes", () => {
  it('every control plane counts the three of them', async () => {
    await until('each to count three', async () => (await Promise.all(replicas.map(processesSeen))).every((n) => n === 3), 10_000);
  });

  it('an org sending through all three holds half the limit, not half of each one\'s; the model server never holds more than the limit', async () => {
    // Org A: 4 requests to each control plane. Each sends its part (2 of 6), and A may hold
    // half of that part: 3 in all, half of 6. Counted per process, A would hold 9.
    const flood = await send(replicas.flatMap((r) => Array.from({ length: 4 }, (): [Replica, string] => [r, keys.a])), 3);
    expect(held()).toBe(3);
    expect(flood.refused).toHaveLength(9);
    for (const refusal of flood.refused) {
      expect(refusal).toMatchObject({ status: 429, type: 'rate_limited' });
      expect(refusal.message).toContain('(its part of 6)');
    }

    // Org B still gets through every control plane, up to the model server's limit...
    const others = await send(replicas.map((r): [Replica, string] => [r, keys.b]), 3);
    expect(held()).toBe(IN_FLIGHT);
    // ...and past it nobody does: each control plane has sent its part.
    const past = await send(replicas.map((r): [Replica, string] => [r, keys.c]), 0);
    expect(past.refused.map((a) => [a.status, a.type])).toEqual([
      [409, 'no_capacity'],
      [409, 'no_capacity'],
      [409, 'no_capacity'],
    ]);
    expect(held()).toBe(IN_FLIGHT);

    upstream.release();
    expect((await flood.answers).filter((a) => a.status === 200)).toHaveLength(3);
    expect((await others.answers).map((a) => a.status)).toEqual([200, 200, 200]);
    upstream.requests.length = 0;
  });

  it('when one control plane goes, the others take its part within seconds', async () => {
    const gone = replicas[2]!;
    await gone.app.close();
    await gone.store.close();
    gone.closed = true;
    await until('the two left to count two', async () => (await Promise.all(live().map(processesSeen))).every((n) => n === 2), 10_000);

    // One control plane now sends 3 of the 6 (it sent 2 while there were three).
    const first = live()[0]!;
    const taken = await send([[first, keys.a], [first, keys.b], [first, keys.c]], 3);
    expect(taken.refused).toEqual([]);
    const past = await send([[first, keys.d]], 0);
    expect(past.refused).toMatchObject([{ status: 409, type: 'no_capacity' }]);
    upstream.release();
    expect((await taken.answers).map((a) => a.status)).toEqual([200, 200, 200]);
    upstream.requests.length = 0;
  });
});
