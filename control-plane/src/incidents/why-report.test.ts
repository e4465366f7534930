// The why report over a real SQLite store: what it resolves, what it shows, and the text.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '@svc/shared';
import type { HealthEventRecord } from '../store/node-store.js';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import { buildWhyReport, renderWhyReport } from './why-report.js';

let dir: string;
let store: SqliteStore;
const G0 = 'GPU-aaaa-0';
const G1 = 'GPU-aaaa-1';

const ev = (over: Partial<HealthEventRecord>): HealthEventRecord => ({
  nodeId: 'node_1', gpuUuid: G1, gpuIndex: 1, kind: 'xid', xid: 48, healthy: false,
  message: 'XID 48: double-bit ECC error; recommended action: reset the GPU (RESET_GPU)', at: 1000, ...over,
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-why-'));
  store = openSqliteStore(dir);
  await store.nodes.createToken({ id: 't', hash: Buffer.from('t'), pool: null, createdAt: 0, expiresAt: 10 ** 12, usedAt: null, usedByNode: null, revokedAt: null });
  await store.nodes.enroll(Buffer.from('t'), 1, {
    id: 'node_1', hostname: 'gpu-host-1', pool: 'na', status: 'ready', cordoned: false, draining: false, hostFacts: null,
    agentVersion: '', protocolVersion: 4, enrolledAt: 0, connectedAt: 0, lastSeenAt: 0,
  }, Buffer.from('s'));
  await store.nodes.flushTelemetry([{ nodeId: 'node_1', lastSeenAt: 5000, gpus: [0, 1].map((i) => ({
    uuid: i === 0 ? G0 : G1, index: i, name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: null, healthy: true, healthReason: '', sample: { temperature_c: 41 }, sampledAt: 5000,
  })) }]);
  await store.nodes.recordHealthEvent(ev({ at: 1000 }));
  await store.nodes.recordHealthEvent(ev({ at: 2000, xid: 13, message: 'XID 13: graphics engine exception; recommended action: restart the application (the GPU is fine) (RESTART_APP)' }));
  await store.nodes.recordHealthEvent(ev({ gpuUuid: G0, gpuIndex: 0, xid: 31, healthy: true, at: 3000, message: 'XID 31: GPU memory page fault' }));
});
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('why report', () => {
  it('for a GPU: its health since the fault began, its timeline with NVIDIA meaning and action', async () => {
    const r = await buildWhyReport(store, 'GPU-aaaa-1', 9000);
    expect(r.target).toEqual({ kind: 'gpu', ref: 'GPU-aaaa-1' });
    expect(r.gpus.find((g) => g.uuid === G1)).toMatchObject({ healthy: false, since: '1970-01-01T00:00:01.000Z', in_question: true });
    expect(r.timeline.map((e) => [e.xid, e.recommended_action])).toEqual([[13, 'RESTART_APP'], [48, 'RESET_GPU']]);
    expect(r.timeline[1]).toMatchObject({ meaning: 'double-bit ECC error', recommended_action_text: 'reset the GPU' });
    const text = renderWhyReport(r);
    expect(text).toContain('> [1] GPU-aaaa-1  NVIDIA H100 80GB HBM3  UNHEALTHY');
    expect(text).not.toContain('[0] GPU-aaaa-0'); // healthy and not asked about
    expect(text).toContain('XID 48 double-bit ECC error; NVIDIA: reset the GPU (RESET_GPU)');
  });

  it('for a node (by hostname): every GPU and every GPU event', async () => {
    const r = await buildWhyReport(store, 'gpu-host-1', 9000);
    expect(r.target.kind).toBe('node');
    expect(r.gpus.map((g) => g.in_question)).toEqual([true, true]);
    expect(r.timeline.map((e) => e.xid)).toEqual([31, 13, 48]);
  });

  it('says what it could not find', async () => {
    await expect(buildWhyReport(store, 'nothing-like-this', 0)).rejects.toThrow(ApiError);
    await expect(buildWhyReport(store, 'GPU-aaaa', 0)).rejects.toThrow(/more than one GPU starts with GPU-aaaa/);
  });
});
