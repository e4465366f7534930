// Builds fleet snapshots for the status pages' table tests: records with every field,
// overridable where a case cares.
import type { GpuRecord, NodeRecord, StoredHealthEvent } from '../store/node-store.js';
import type { InstanceRecord } from '../instances/instance-record.js';
import type { ReplicaRecord } from '../replicas/replica-record.js';
import { replicaRecord as runningReplica } from '../replicas/replica-record-fixture.js';
import type { FleetSnapshot } from './fleet-read.js';

export const AT = Date.parse('2026-11-24T06:00:00Z');
export const H100 = 'NVIDIA H100 80GB HBM3';

export const nodeRecord = (id: string, patch: Partial<NodeRecord> = {}): NodeRecord => ({
  id,
  hostname: `${id}-host`,
  pool: 'na',
  status: 'ready',
  cordoned: false,
  draining: false,
  hostFacts: null,
  agentVersion: '0.1.0',
  protocolVersion: 3,
  enrolledAt: AT - 60_000,
  connectedAt: AT - 60_000,
  lastSeenAt: AT,
  ...patch,
});

export const gpuRecord = (nodeId: string, index: number, patch: Partial<GpuRecord> = {}): GpuRecord => ({
  uuid: `GPU-${nodeId}-${index}`,
  nodeId,
  index,
  name: H100,
  memoryTotalBytes: 80 * 2 ** 30,
  healthy: true,
  healthReason: '',
  sample: { utilization_gpu_percent: 0 },
  sampledAt: AT,
  ...patch,
});

export const instanceRecord = (id: string, nodeId: string, gpuUuids: string[], patch: Partial<InstanceRecord> = {}): InstanceRecord =>
  ({
    id,
    orgId: 'org_a',
    keyId: null,
    status: 'ready',
    failureReason: null,
    sku: 'h100-80gb',
    gpus: gpuUuids.length,
    pool: 'na',
    mode: 'on_demand',
    durationHours: null,
    image: 'img',
    sshKeys: [],
    labels: {},
    nodeId,
    gpuUuids,
    rateMicros: 0,
    progress: null,
    createdAt: AT,
    readyAt: AT,
    expiresAt: null,
    terminatedAt: null,
    stop: null,
    access: null,
    updatedAt: AT,
    ...patch,
  }) as InstanceRecord;

export const replicaRecord = (id: string, nodeId: string, patch: Partial<ReplicaRecord> = {}): ReplicaRecord =>
  runningReplica(id, { nodeId, endpoint: '10.0.0.7:31000', createdAt: AT, readyAt: AT, changedAt: AT, ...patch });

export const xidEvent = (seq: number, nodeId: string, gpuIndex: number, xid: number, message = ''): StoredHealthEvent => ({
  seq,
  nodeId,
  gpuUuid: `GPU-${nodeId}-${gpuIndex}`,
  gpuIndex,
  kind: 'xid',
  xid,
  healthy: false,
  message,
  at: AT - 1000 + seq,
});

export const snapshot = (patch: Partial<FleetSnapshot> = {}): FleetSnapshot => ({
  at: AT,
  nodes: [],
  gpus: [],
  events: [],
  instances: [],
  replicas: [],
  orgNames: new Map([['org_a', 'acme']]),
  desired: [],
  ...patch,
});
