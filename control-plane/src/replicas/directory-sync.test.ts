import { describe, expect, it } from 'vitest';
import { DirectorySync } from './directory-sync.js';
import { LiveReplicaDirectory } from './replica-directory.js';
import type { ReplicaRecord } from './replica-record.js';
import { replicaRecord } from './replica-record-fixture.js';

const replica = (id: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord => replicaRecord(id, { createdAt: 1, readyAt: 1, changedAt: 1, ...over });

/** A store whose reads the test answers one at a time, with the row as it is when answered. */
function slowStore() {
  const rows = new Map<string, ReplicaRecord>();
  const pending: (() => void)[] = [];
  let reads = 0;
  return {
    rows,
    get reads() {
      return reads;
    },
    get(id: string): Promise<ReplicaRecord | undefined> {
      reads++;
      return new Promise((resolve) => pending.push(() => resolve(rows.get(id))));
    },
    async listActive(): Promise<ReplicaRecord[]> {
      return [...rows.values()].filter((r) => r.status !== 'stopped');
    },
    /** Answers the oldest read; resolves after its continuation ran. */
    async answer(): Promise<void> {
      pending.shift()!();
      await new Promise((r) => setImmediate(r));
    },
  };
}

describe('DirectorySync', () => {
  it('notices during a read cause one more read, so the directory ends at the latest row', async () => {
    const store = slowStore();
    const directory = new LiveReplicaDirectory();
    const sync = new DirectorySync(store, directory, (err) => {
      throw err;
    });
    store.rows.set('rep_1', replica('rep_1'));
    sync.changed('rep_1');
    // Two more changes while the first read is out: the replica stopped, and the notices coalesce.
    store.rows.set('rep_1', replica('rep_1', { status: 'stopped', endpoint: null }));
    sync.changed('rep_1');
    sync.changed('rep_1');
    expect(store.reads).toBe(1);
    await store.answer();
    expect(store.reads).toBe(2);
    await store.answer();
    expect(directory.ready()).toEqual([]);
    expect(store.reads).toBe(2);
  });

  it.each([
    ['a running replica appears', replica('rep_2'), ['rep_2']],
    ['a replica not yet running stays out', replica('rep_2', { status: 'starting', endpoint: null }), []],
    ['a deleted row is removed', undefined, []],
  ] as const)('%s', async (_case, row, listed) => {
    const store = slowStore();
    const directory = new LiveReplicaDirectory();
    directory.update(replica('rep_2', { endpoint: '127.0.0.1:1' }));
    if (row) store.rows.set('rep_2', row);
    new DirectorySync(store, directory, () => {}).changed('rep_2');
    await store.answer();
    expect(directory.ready().map((r) => r.id)).toEqual(listed);
  });

  it('a resync drops replicas the store no longer lists and adds the ones it does', async () => {
    const store = slowStore();
    const directory = new LiveReplicaDirectory();
    directory.update(replica('rep_gone'));
    store.rows.set('rep_new', replica('rep_new'));
    await new DirectorySync(store, directory, () => {}).resync();
    expect(directory.ready().map((r) => r.id)).toEqual(['rep_new']);
  });
});
