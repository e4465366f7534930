// The replica as operators read it (svcctl replicas list --json).
import { toRfc3339 } from '@svc/shared';
import type { ReplicaRecord } from './replica-record.js';

const iso = (ms: number | null): string | null => (ms === null ? null : toRfc3339(ms));

export function replicaView(r: ReplicaRecord) {
  return {
    id: r.id,
    object: 'replica' as const,
    model: r.model,
    quantization: r.quantization,
    pool: r.pool,
    node_id: r.nodeId,
    engine: r.engine,
    image: r.image,
    status: r.status,
    endpoint: r.endpoint,
    message: r.message,
    restarts: r.restarts,
    gpu_uuids: r.gpuUuids,
    args: r.args,
    created_at: iso(r.createdAt),
    ready_at: iso(r.readyAt),
    changed_at: iso(r.changedAt),
    ended_at: iso(r.endedAt),
  };
}
