import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger, ManualClock } from '@svc/shared';
import { openSqliteStore } from '../store/sqlite/sqlite-store.js';
import { EnrollmentService } from './enrollment-service.js';
import { gpuFromSample, healthEventRecord, NodeRegistry } from './node-registry.js';
import { resolveNodeTiming } from './timing.js';

describe('healthEventRecord', () => {
  const base = { gpu_uuid: 'GPU-a', gpu_index: 2, xid: 0, healthy: false, message: '', at_ms: 0, recommended_action: '', driver_recovery_action: '' };

  it('maps protocol kinds to timeline kinds, naming an XID without a message', () => {
    expect(healthEventRecord('node_1', { ...base, kind: 'XID', xid: 79 }, 5)).toEqual({
      nodeId: 'node_1',
      gpuUuid: 'GPU-a',
      gpuIndex: 2,
      kind: 'xid',
      xid: 79,
      healthy: false,
      message: 'XID 79',
      at: 5,
    });
    expect(healthEventRecord('node_1', { ...base, kind: 'ECC_UNCORRECTABLE', message: '2 new uncorrectable' }, 5)).toMatchObject({ kind: 'ecc_uncorrectable', xid: null, message: '2 new uncorrectable' });
    expect(healthEventRecord('node_1', { ...base, kind: 'RECOVERED', healthy: true }, 5)).toMatchObject({ kind: 'recovered', healthy: true, message: 'recovered' });
    expect(healthEventRecord('node_1', { ...base, kind: 'HEALTH_EVENT_KIND_UNSPECIFIED' }, 5).kind).toBe('other');
  });
});

describe('gpuFromSample', () => {
  it('keeps reported values, leaves unsupported ones absent and drops loader-internal keys', () => {
    const sample = {
      index: 0,
      uuid: 'GPU-a',
      name: 'NVIDIA L40S',
      pci_bus_id: '0000:01:00.0',
      memory_total_bytes: 48e9,
      temperature_c: 0,
      _temperature_c: 'temperature_c',
      throttle_reasons: [],
      healthy: false,
      health_reason: 'XID 48',
    };
    const gpu = gpuFromSample(sample as never, 123);
    expect(gpu).toMatchObject({ uuid: 'GPU-a', memoryTotalBytes: 48e9, healthy: false, healthReason: 'XID 48', sampledAt: 123 });
    expect(gpu.sample).toHaveProperty('temperature_c', 0); // a real zero stays a zero
    expect(gpu.sample).not.toHaveProperty('_temperature_c');
    expect(gpu.sample).not.toHaveProperty('power_usage_w');
  });
});

describe('NodeRegistry after a control-plane restart', () => {
  it('gives a node last seen before the restart a full deadline from the restart, then declares it unreachable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-registry-'));
    const store = openSqliteStore(dir);
    try {
      const clock = new ManualClock(1_000_000);
      const enrollment = new EnrollmentService(store.nodes, clock, 3600);
      const { node } = await enrollment.enroll({ token: (await enrollment.createToken({ pool: 'na' })).value, hostname: 'h', pool: 'na', protocolVersion: 1 });
      // Last heard of 10 minutes before this process started.
      await store.nodes.updateSession(node.id, { hostname: 'h', agentVersion: 't', protocolVersion: 1, status: 'ready', connectedAt: 400_000, lastSeenAt: 400_000 }, null);
      const registry = new NodeRegistry(store.nodes, clock, resolveNodeTiming({ reportIntervalMs: 1000, nodeDeadlineMs: 3000, telemetryFlushMs: 0 }), createLogger('silent', 'test'));
      const lost: string[] = [];
      registry.onUnreachable = (id) => lost.push(id);
      await registry.load();
      registry.start();
      try {
        expect(await registry.sweep()).toEqual([]);
        clock.advance(3000);
        expect(await registry.sweep()).toEqual([]);
        expect(registry.status(node.id)).toBe('ready');
        // Its agent never came back: one deadline after the restart it is unreachable.
        clock.advance(1);
        expect(await registry.sweep()).toEqual([node.id]);
        expect(lost).toEqual([node.id]);
        expect((await store.nodes.getNode(node.id))?.status).toBe('unreachable');
        // Billing still sees when the node was really last heard of.
        expect(registry.lastContact(node.id)).toBe(400_000);
      } finally {
        await registry.stop();
      }
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Two replicas' registries on one store (a deadline of 3 s): the one holding the node's stream, and another. */
function twoReplicas() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-registry-'));
  const store = openSqliteStore(dir);
  const clock = new ManualClock(1_000_000);
  const timing = resolveNodeTiming({ reportIntervalMs: 1000, nodeDeadlineMs: 3000, telemetryFlushMs: 0 });
  const log = createLogger('silent', 'test');
  const holder = new NodeRegistry(store.nodes, clock, timing, log);
  const other = new NodeRegistry(store.nodes, clock, timing, log);
  return { dir, store, clock, holder, other, enrollment: new EnrollmentService(store.nodes, clock, 3600) };
}

describe('NodeRegistry on replicas sharing one store', () => {
  it('a replica that does not hold the stream never marks a node its holder hears, and marks it once the holder stops flushing', async () => {
    const { dir, store, clock, holder, other, enrollment } = twoReplicas();
    try {
      const enroll = async (hostname: string) =>
        (await enrollment.enroll({ token: (await enrollment.createToken({ pool: 'na' })).value, hostname, pool: 'na', protocolVersion: 1 })).node;
      const early = await enroll('early');
      await holder.sessionStarted(early, { hostname: 'early', agentVersion: 't', protocolVersion: 1 });
      await other.load();
      other.start();
      // Connected to the holder after the other replica loaded its nodes.
      const late = await enroll('late');
      await holder.sessionStarted(late, { hostname: 'late', agentVersion: 't', protocolVersion: 1 });
      const lost: string[] = [];
      other.onUnreachable = (id) => lost.push(id);
      // Ten deadlines of the holder hearing both nodes (and flushing) while the other sweeps.
      for (let i = 0; i < 30; i++) {
        clock.advance(1000);
        holder.seen(early.id);
        holder.seen(late.id);
        await holder.flush();
        expect(await other.sweep()).toEqual([]);
      }
      expect((await store.nodes.getNode(early.id))?.status).toBe('ready');
      expect(lost).toEqual([]);
      // The holder dies: nothing is flushed any more. Both nodes are marked by the other replica, once.
      clock.advance(3001);
      expect((await other.sweep()).sort()).toEqual([early.id, late.id].sort());
      expect(await other.sweep()).toEqual([]);
      expect(lost.sort()).toEqual([early.id, late.id].sort());
      expect((await store.nodes.listHealthEvents(late.id, 10)).filter((e) => e.kind === 'node_down')).toHaveLength(1);
    } finally {
      await other.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a holder that heard its node throughout, but could not write for a while, brings it back once it can; the other replica can mark it again later', async () => {
    const { dir, store, clock, holder, other, enrollment } = twoReplicas();
    try {
      const node = (await enrollment.enroll({ token: (await enrollment.createToken({ pool: 'na' })).value, hostname: 'h', pool: 'na', protocolVersion: 1 })).node;
      await holder.sessionStarted(node, { hostname: 'h', agentVersion: 't', protocolVersion: 1 });
      await other.load();
      other.start();
      // The holder hears the node every second but writes nothing (its database is away).
      for (let i = 0; i < 4; i++) {
        clock.advance(1000);
        holder.seen(node.id);
      }
      expect(await other.sweep()).toEqual([node.id]);
      expect((await store.nodes.getNode(node.id))?.status).toBe('unreachable');
      // The database is back: the holder writes, and squares its view with the store's.
      clock.advance(1000);
      holder.seen(node.id);
      await holder.flush();
      clock.advance(3001 - 1000);
      holder.seen(node.id);
      expect(await holder.sweep()).toEqual([]);
      expect((await store.nodes.getNode(node.id))?.status).toBe('ready');
      expect((await store.nodes.listHealthEvents(node.id, 10)).map((e) => e.kind).slice(0, 2)).toEqual(['node_up', 'node_down']);
      // The holder goes for good: the other replica, which had it unreachable, marks it again.
      clock.advance(3001);
      expect(await other.sweep()).toEqual([]); // it learns from the store that the node is ready again
      clock.advance(3001);
      expect(await other.sweep()).toEqual([node.id]);
    } finally {
      await other.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
