// The session relay between replicas on a real PostgreSQL: announcements, roll calls for
// a replica that starts late, and the wake-up when a command is queued for a node.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { eventually } from '../../../test/support/node-agent-process.js';
import { startPostgres, type TestPostgres } from '../../../test/support/postgres.js';
import { openPostgresStore, type PostgresStore } from '../store/postgres/postgres-store.js';
import { PgSessionRelay } from './pg-session-relay.js';
import type { SessionStamp } from './session-holders.js';

let server: TestPostgres;
let url: string;
let store: PostgresStore;
const relays: PgSessionRelay[] = [];
const log = createLogger('silent', 'test');

beforeAll(async () => {
  server = await startPostgres();
  url = await server.createDatabase();
  store = await openPostgresStore(url, { poolSize: 2 });
}, 60_000);

afterAll(async () => {
  for (const relay of relays) await relay.close();
  await store?.close();
  await server?.stop();
});

/** A replica's relay holding `sessions`, recording the nodes it was woken for. */
async function replica(sessions: SessionStamp[] = []): Promise<{ relay: PgSessionRelay; woken: string[]; sessions: SessionStamp[] }> {
  const relay = new PgSessionRelay(url, log);
  const woken: string[] = [];
  relay.localSessions = () => sessions;
  relay.onWork = (node) => woken.push(node);
  relays.push(relay);
  await relay.start();
  return { relay, woken, sessions };
}

describe('PgSessionRelay', () => {
  it('a replica that starts late learns the sessions others hold (roll call); attach and detach reach every replica', async () => {
    const a = await replica([['node_a', 100]]);
    const b = await replica();
    await eventually(() => b.relay.holderOf('node_a') === a.relay.replica, 5_000, 'B to hear A announce node_a');
    expect(b.relay.heldElsewhere('node_a')).toBe(true);
    // A replica never lists itself as holding elsewhere.
    expect(a.relay.heldElsewhere('node_a')).toBe(false);

    // The agent of node_a moves to B: the newer session wins on A, and A's late "ended" does not undo it.
    b.sessions.push(['node_a', 200]);
    b.relay.attached(['node_a', 200]);
    await eventually(() => a.relay.holderOf('node_a') === b.relay.replica, 5_000, 'A to hear B hold node_a');
    a.relay.detached(['node_a', 100]);
    b.sessions.splice(0);
    b.relay.detached(['node_a', 200]);
    await eventually(() => !a.relay.heldElsewhere('node_a'), 5_000, 'A to hear B end its session');
  });

  it('a command queued for a node (relayed or operator) wakes every replica at once, naming the node', async () => {
    const a = await replica();
    const b = await replica();
    await store.nodes.queueRelayedCommand({ nodeId: 'node_w', command: '{"command_id":"cmd_1"}', createdAt: Date.now() });
    await eventually(() => a.woken.includes('node_w') && b.woken.includes('node_w'), 5_000, 'both replicas to be woken');
    // Nothing was taken by the wake-up itself: the holder takes it.
    expect((await store.nodes.takeRelayedCommands(['node_w'], 0)).map((c) => c.command)).toEqual(['{"command_id":"cmd_1"}']);
  });

  it('ignores what is not a relay message on its channel', async () => {
    const a = await replica();
    await store.pool.query(`SELECT pg_notify('svc_agent_relay', 'not json'), pg_notify('svc_agent_relay', '{"t":"attach","r":"x","s":"nope"}')`);
    await store.nodes.queueRelayedCommand({ nodeId: 'node_after', command: '{}', createdAt: Date.now() });
    await eventually(() => a.woken.includes('node_after'), 5_000, 'the relay to keep working after garbage');
    expect(a.woken).toEqual(['node_after']);
  });

  it('comes back by itself when its connection is cut, and catches up: what it announced meanwhile and the work of its own nodes', async () => {
    const a = await replica([['node_c', 300]]);
    const b = await replica();
    await eventually(() => b.relay.holderOf('node_c') === a.relay.replica, 5_000, 'B to hear A hold node_c');
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      // Every relay's listening connection (their last statement is a LISTEN or a NOTIFY of their own).
      const cut = await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND (query LIKE 'LISTEN svc_agent_relay%' OR query = 'SELECT pg_notify($1, $2)')`,
      );
      expect(cut.rowCount).toBeGreaterThanOrEqual(2);
    } finally {
      await admin.end();
    }
    // Announced while the connection may be down: repeated once it is back.
    a.sessions.push(['node_d', 400]);
    a.relay.attached(['node_d', 400]);
    a.woken.splice(0);
    await eventually(() => b.relay.holderOf('node_d') === a.relay.replica, 10_000, 'B to hear A hold node_d after the cut');
    await eventually(() => a.woken.includes('node_c'), 10_000, 'A to look for work queued for its nodes meanwhile');
  });
});
