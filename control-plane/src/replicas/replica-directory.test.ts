import { describe, expect, it } from 'vitest';
import type { ReplicaRecord } from './replica-record.js';
import { replicaRecord } from './replica-record-fixture.js';
import { LiveReplicaDirectory } from './replica-directory.js';

const record = (id: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord => replicaRecord(id, { endpoint: '127.0.0.1:49153', image: '127.0.0.1:5000/svc/cpu-engine:3', ...over });

describe('LiveReplicaDirectory', () => {
  it('lists running replicas with their base URL, filtered by model, quantization and pool', () => {
    const dir = new LiveReplicaDirectory();
    dir.update(record('rep_a'));
    dir.update(record('rep_b', { pool: 'eu', quantization: 'fp16', endpoint: '10.0.0.2:8000' }));
    dir.update(record('rep_c', { model: 'tiny-embed' }));
    expect(dir.ready({ model: 'tiny-chat' }).map((r) => r.id)).toEqual(['rep_a', 'rep_b']);
    expect(dir.ready({ model: 'tiny-chat', pool: 'eu' })).toEqual([
      { id: 'rep_b', model: 'tiny-chat', quantization: 'fp16', pool: 'eu', nodeId: 'node_1', baseUrl: 'http://10.0.0.2:8000', engine: 'cpu', image: '127.0.0.1:5000/svc/cpu-engine:3' },
    ]);
    expect(dir.ready({ model: 'tiny-chat', quantization: 'int4' }).map((r) => r.id)).toEqual(['rep_a']);
    expect(dir.ready().map((r) => r.id)).toEqual(['rep_a', 'rep_b', 'rep_c']);
    expect(dir.ready({ model: 'nope' })).toEqual([]);
    expect(dir.poolsServing('tiny-chat')).toEqual(['na', 'eu']);
  });

  it('drops a replica that stops being healthy, and takes it back with its new endpoint', () => {
    const dir = new LiveReplicaDirectory();
    dir.update(record('rep_a'));
    dir.update(record('rep_a', { status: 'unhealthy' }));
    expect(dir.ready()).toEqual([]);
    expect(dir.poolsServing('tiny-chat')).toEqual([]);
    dir.update(record('rep_a', { endpoint: '127.0.0.1:50000' }));
    expect(dir.ready()[0]!.baseUrl).toBe('http://127.0.0.1:50000');
    dir.remove('rep_a');
    expect(dir.ready()).toEqual([]);
  });

  it('never lists a running replica whose endpoint is not known', () => {
    const dir = new LiveReplicaDirectory();
    dir.update(record('rep_a', { endpoint: null }));
    expect(dir.ready()).toEqual([]);
  });

  it('hands out the same frozen list until something changes (cheap on the hot path)', () => {
    const dir = new LiveReplicaDirectory();
    dir.update(record('rep_a'));
    const first = dir.ready({ model: 'tiny-chat' });
    expect(dir.ready({ model: 'tiny-chat' })).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(() => (first as unknown as unknown[]).push(1)).toThrow();
  });
});
