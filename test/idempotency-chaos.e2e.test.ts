// The control plane SIGKILLed in the middle of 100 concurrent creates and terminates (52
// clients churning through 8 GPUs: create, terminate; 4 keep theirs),
// each client retrying with its X-Service-Idempotency-Key until it gets an answer (across
// the restart, at the same address): every acknowledged create exists exactly once, no
// instance exists that no create acknowledged, no reservation is charged twice, every
// acknowledged terminate ends its instance, and once things settle the containers
// running on Docker (label svc.instance) are exactly the instances that are ready.
// Real control-plane process, real agent with GPUs from the fake NVML, Docker, busybox.
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_FILE } from '../control-plane/src/store/sqlite/sqlite-store.js';
import { startCrashStack, type CrashStack } from './support/crash-stack.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { eventually } from './support/node-agent-process.js';

/** The fake NVML's most: GPUs are scarce, so creates and terminates churn through them. */
const GPUS = 8;
/** Each client gets one instance (retrying no_capacity with a new key) and terminates it, but the keepers. */
const CLIENTS = 52;
const KEEPERS = 4;
/** The kill comes once this many instances are committed: in the middle of the churn. */
const KILL_AT = 10;
let stack: CrashStack;
beforeAll(async () => {
  // A claim orphaned by the kill is taken over 2 s after it was last renewed.
  stack = await startCrashStack({ name: 'idem-chaos', gpus: GPUS, env: { SVC_IDEMPOTENCY_LEASE_SECONDS: '2' } });
});
afterAll(async () => stack?.close());

interface Answer {
  status: number;
  body: any;
  attempts: number;
}

/**
 * POSTs until the server answers something other than "still in progress",
 * "unavailable" or "slow down"; a refused or cut connection (the control plane is down)
 * is retried too. Like a real client, a 429 waits its second plus jitter (52 clients
 * polling at 10/s each would otherwise exceed the key's 1,200 requests per minute).
 */
async function untilAnswered(path: string, body: unknown, idem: string): Promise<Answer> {
  for (let attempts = 1; ; attempts++) {
    let wait = 100;
    try {
      const res = await stack.api('POST', path, body, { 'x-service-idempotency-key': idem });
      const type = res.body?.error?.type;
      if (type === 'rate_limited') wait = 1_000 + Math.random() * 1_000;
      else if (type !== 'conflict' && type !== 'service_unavailable') return { status: res.status, body: res.body, attempts };
    } catch {
      // The control plane is down or restarting.
    }
    await new Promise((r) => setTimeout(r, wait));
  }
}

const committedInstances = (): number => {
  const db = new Database(join(stack.dataDir, DATABASE_FILE), { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM instances').get() as { n: number }).n;
  } finally {
    db.close();
  }
};

describe('idempotency under a crash in the middle of concurrent creates and terminates', () => {
  it('every acknowledged create exists once, no duplicate charge, and Docker matches the instances', { timeout: 300_000 }, async () => {
    const body = { sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE, duration_hours: 1 };
    const clients = Array.from({ length: CLIENTS }, async (_, i) => {
      // A create that finds no GPU free is a new request later (a new key); each key is retried until answered.
      let created: Answer;
      let noCapacity = 0;
      for (;;) {
        created = await untilAnswered('/v1/instances', { ...body, labels: { client: String(i) } }, randomUUID());
        if (created.status !== 409 || created.body.error.type !== 'no_capacity') break;
        noCapacity++;
        await new Promise((r) => setTimeout(r, 200 + Math.random() * 300));
      }
      if (created.status !== 201 || i < KEEPERS) return { created, noCapacity, terminated: undefined };
      const terminated = await untilAnswered(`/v1/instances/${created.body.id}/terminate`, { force: true }, randomUUID());
      return { created, noCapacity, terminated };
    });

    // Kill the control plane once the churn is under way, and start it again.
    await eventually(() => committedInstances() >= KILL_AT, 120_000, `${KILL_AT} instances to be committed`, 10);
    await stack.restart();
    const results = await Promise.all(clients);

    const answers = results.map((r) => r.created);
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(201);
    const acknowledged = answers.map((a) => a.body.id as string);
    expect(new Set(acknowledged).size).toBe(CLIENTS);
    // The kill cut requests in flight (creates or terminates, whichever were on the wire
    // at that moment; creates that found no GPU free may all be between tries): a later
    // attempt with the same key answered them.
    const attempts = [...answers, ...results.flatMap((r) => (r.terminated ? [r.terminated] : []))].map((a) => a.attempts);
    expect(Math.max(...attempts)).toBeGreaterThan(1);

    // Exactly the acknowledged instances exist: no instance without its answer, none twice.
    const listed = (await stack.api('GET', '/v1/instances?limit=100')).body.data as Array<{ id: string; labels: Record<string, string> }>;
    expect(listed.map((i) => i.id).sort()).toEqual([...acknowledged].sort());
    const perClient = new Map<string, number>();
    for (const i of listed) perClient.set(i.labels.client!, (perClient.get(i.labels.client!) ?? 0) + 1);
    expect([...perClient.values()].every((n) => n === 1)).toBe(true);

    // One reservation charge per instance.
    const charges = (await stack.api('GET', '/v1/billing/charges?limit=100')).body.data as Array<{ instance_id: string; kind: string }>;
    const reservations = charges.filter((c) => c.kind === 'reservation');
    expect(reservations.map((c) => c.instance_id).sort()).toEqual([...acknowledged].sort());

    // Acknowledged terminates end their instance; the rest run. Then Docker agrees.
    const terminated = new Set(results.filter((r) => r.terminated?.status === 200).map((r) => r.created.body.id as string));
    for (const r of results) if (r.terminated) expect(r.terminated.status, JSON.stringify(r.terminated.body)).toBe(200);
    let last: Array<{ id: string; status: string; failure_reason: string | null }> = [];
    const settled = await eventually(
      async () => {
        last = (await stack.api('GET', '/v1/instances?limit=100')).body.data;
        return last.every((i) => ['ready', 'terminated', 'failed'].includes(i.status)) ? last : undefined;
      },
      120_000,
      'every instance to settle',
    ).catch((err: unknown) => {
      const unsettled = last.filter((i) => !['ready', 'terminated', 'failed'].includes(i.status));
      const problems = (text: string) => text.split('\n').filter((l) => /"level":(40|50)/.test(l) || /error|warn/i.test(l)).slice(-30).join('\n');
      throw new Error(`${(err as Error).message}: ${JSON.stringify(unsettled)}\n--- control plane ---\n${problems(stack.cp.output())}\n--- agent ---\n${problems(stack.agent.output())}`);
    });
    // A create placed on the node before it reconnected to the restarted control plane
    // fails at once (no container, no start): an answer, and nothing that should run.
    const lostBeforeReady = settled.filter((i) => i.status === 'failed');
    for (const i of lostBeforeReady) expect(i.failure_reason).toMatch(/^node lost before ready/);
    for (const i of settled.filter((x) => x.status !== 'failed')) expect(`${i.id} ${i.status}`).toBe(`${i.id} ${terminated.has(i.id) ? 'terminated' : 'ready'}`);
    const ready = settled.filter((i) => i.status === 'ready').map((i) => i.id).sort();
    const running = await eventually(
      async () => {
        const containers = await stack.containers();
        const up = [...containers].filter(([, state]) => state === 'running').map(([id]) => id).sort();
        return JSON.stringify(up) === JSON.stringify(ready) ? up : undefined;
      },
      60_000,
      'the running containers to be the ready instances',
    ).catch(async () => [...(await stack.containers())].filter(([, s]) => s === 'running').map(([id]) => id).sort());
    expect(running).toEqual(ready);
  });
});
