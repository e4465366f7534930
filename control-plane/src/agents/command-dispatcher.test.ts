// The dispatcher's relayed task commands, on a real SQLite store: the holder sends what
// other replicas queued for the nodes it holds, in order and once; commands for nodes it
// does not hold stay for their holder; stale ones are dropped; a wake-up that arrives
// while a poll runs is not lost.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLogger, ManualClock } from '@svc/shared';
import type { Command } from '@svc/proto';
import { NodeRegistry } from '../nodes/node-registry.js';
import { resolveNodeTiming } from '../nodes/timing.js';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import { CommandDispatcher, RELAYED_COMMAND_TTL_MS } from './command-dispatcher.js';
import type { AgentSession } from './session.js';

let dir: string;
let store: SqliteStore;
const clock = new ManualClock(10_000_000);
const log = createLogger('silent', 'test');

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-dispatcher-'));
  store = openSqliteStore(dir);
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A dispatcher holding sessions of `held`, recording what each session was sent. */
function holder(held: string[]) {
  const sent: Array<[string, string]> = [];
  const session = (nodeId: string) => ({ sendCommand: (c: Command) => (sent.push([nodeId, c.command_id!]), true) }) as unknown as AgentSession;
  const registry = new NodeRegistry(store.nodes, clock, resolveNodeTiming({ reportIntervalMs: 1000, nodeDeadlineMs: 0, telemetryFlushMs: 0 }), log);
  const dispatcher = new CommandDispatcher(store.nodes, registry, clock, (id) => (held.includes(id) ? session(id) : undefined), log, 1000, () => held);
  return { dispatcher, sent };
}
const queue = (nodeId: string, commandId: string, createdAt = clock.now()) =>
  store.nodes.queueRelayedCommand({ nodeId, command: JSON.stringify({ command_id: commandId, stop_task: { task_id: 't', signal: 'SIGTERM', timeout_ms: 0, force: true } }), createdAt });

describe('CommandDispatcher, relayed commands', () => {
  it('sends the queued commands of held nodes oldest first and once; leaves others for their holder; drops stale ones', async () => {
    await queue('node_a', 'stale', clock.now() - RELAYED_COMMAND_TTL_MS - 1);
    await queue('node_a', 'first');
    await queue('node_b', 'not mine');
    await queue('node_a', 'second');
    const { dispatcher, sent } = holder(['node_a']);
    await dispatcher.poll();
    await dispatcher.poll();
    expect(sent).toEqual([
      ['node_a', 'first'],
      ['node_a', 'second'],
    ]);
    // node_b's holder still finds its command.
    const other = holder(['node_b']);
    await other.dispatcher.poll();
    expect(other.sent).toEqual([['node_b', 'not mine']]);
  });

  it('a wake-up while a poll runs is answered by another poll after it', async () => {
    const { dispatcher, sent } = holder(['node_a']);
    await queue('node_a', 'early');
    const running = dispatcher.poll();
    // Queued after the running poll may have read: without a second pass it would wait for the timer.
    await queue('node_a', 'late');
    const woken = dispatcher.poll();
    await Promise.all([running, woken]);
    expect(sent.map(([, id]) => id)).toEqual(['early', 'late']);
  });
});
