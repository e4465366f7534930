// A model-server replica row for tests: a running tiny-chat replica, with `over` on top.
import type { ReplicaRecord } from './replica-record.js';

export const replicaRecord = (id: string, over: Partial<ReplicaRecord> = {}): ReplicaRecord => ({
  id,
  model: 'tiny-chat',
  quantization: 'int4',
  pool: 'na',
  nodeId: 'node_1',
  gpuUuids: [],
  engine: 'cpu',
  image: 'img',
  args: [],
  env: {},
  containerPort: 8000,
  healthPath: '/health',
  status: 'running',
  endpoint: '127.0.0.1:9000',
  message: '',
  restarts: 0,
  createdAt: 0,
  readyAt: 0,
  changedAt: 0,
  endedAt: null,
  ...over,
});
