// The replica directory the inference router reads on every request: the replicas that
// run and passed their latest health check, as agents report them. In memory and
// rebuilt only when a replica changes (rare), so a lookup is a map read and, with a
// quantization or pool, a filter over a handful of entries. It is also the models'
// LiveCapacity: GET /v1/models reports `pools` from it.
import { POOLS, type Pool, type Quantization } from '../models/catalog.js';
import type { LiveCapacity } from '../models/model-service.js';
import { replicaApiKey } from './engine-adapter.js';
import type { ReplicaRecord } from './replica-record.js';

export interface LiveReplica {
  /** rep_... */
  id: string;
  model: string;
  quantization: Quantization;
  pool: Pool;
  nodeId: string;
  /** The OpenAI-compatible root, e.g. "http://127.0.0.1:49153". */
  baseUrl: string;
  engine: 'vllm' | 'cpu';
  /** The model server's image, for system_fingerprint. */
  image: string;
  /**
   * The bearer the replica requires (engine-adapter.ts); undefined for a replica started
   * without one. Internal: never in an API answer.
   */
  apiKey: string | undefined;
}

export interface ReplicaDirectory {
  /** Replicas running and passing their latest health check (agent-reported). */
  ready(filter?: { model?: string; quantization?: string; pool?: string }): readonly LiveReplica[];
}

const NONE: readonly LiveReplica[] = Object.freeze([]);

/** The directory entry for a stored replica, or undefined when it is not routable. */
export function liveReplicaOf(record: ReplicaRecord): LiveReplica | undefined {
  if (record.status !== 'running' || !record.endpoint) return undefined;
  return Object.freeze({
    id: record.id,
    model: record.model,
    quantization: record.quantization,
    pool: record.pool,
    nodeId: record.nodeId,
    baseUrl: `http://${record.endpoint}`,
    engine: record.engine,
    image: record.image,
    apiKey: replicaApiKey(record),
  });
}

export class LiveReplicaDirectory implements ReplicaDirectory, LiveCapacity {
  private readonly byId = new Map<string, LiveReplica>();
  private all: readonly LiveReplica[] = NONE;
  private byModel = new Map<string, readonly LiveReplica[]>();

  ready(filter: { model?: string; quantization?: string; pool?: string } = {}): readonly LiveReplica[] {
    const base = filter.model === undefined ? this.all : (this.byModel.get(filter.model) ?? NONE);
    if (filter.quantization === undefined && filter.pool === undefined) return base;
    return base.filter((r) => (filter.quantization === undefined || r.quantization === filter.quantization) && (filter.pool === undefined || r.pool === filter.pool));
  }

  /** Pools with at least one ready replica of the model, in the catalog's pool order. */
  poolsServing(modelId: string): Pool[] {
    const replicas = this.byModel.get(modelId);
    if (!replicas) return [];
    return POOLS.filter((pool) => replicas.some((r) => r.pool === pool));
  }

  /** Applies a stored replica: listed while it runs healthy, gone otherwise. */
  update(record: ReplicaRecord): void {
    const live = liveReplicaOf(record);
    const current = this.byId.get(record.id);
    if (!live) {
      if (current) this.remove(record.id);
      return;
    }
    if (current && current.baseUrl === live.baseUrl) return;
    this.byId.set(record.id, live);
    this.rebuild();
  }

  remove(id: string): void {
    if (this.byId.delete(id)) this.rebuild();
  }

  private rebuild(): void {
    const all = [...this.byId.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    const byModel = new Map<string, LiveReplica[]>();
    for (const r of all) byModel.set(r.model, [...(byModel.get(r.model) ?? []), r]);
    // Swapped whole: a reader never sees a half-built index.
    this.all = Object.freeze(all);
    this.byModel = new Map([...byModel].map(([model, list]) => [model, Object.freeze(list)]));
  }
}
