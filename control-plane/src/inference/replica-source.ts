// What the inference router needs to know about model-server replicas: the live ones
// (running and passing their health checks, as agents report them) and where replicas
// are meant to run (configuration), which tells "not served in this pool" (404) apart
// from "served here but degraded right now" (503).
import type { Pool, Quantization } from '../models/catalog.js';

export interface LiveReplica {
  id: string;
  model: string;
  quantization: Quantization;
  pool: Pool;
  nodeId: string;
  /** The OpenAI-compatible root, e.g. "http://127.0.0.1:49153". */
  baseUrl: string;
  engine: 'vllm' | 'cpu';
  /** The engine image: part of system_fingerprint. */
  image: string;
}

export interface ReplicaDirectory {
  /** Replicas running and passing their latest health check; cheap, called per request. */
  ready(filter?: { model?: string; quantization?: string; pool?: string }): readonly LiveReplica[];
}

export interface ServingPlan {
  /** Replicas wanted for (model, quantization) in `pool`; 0 when none are configured. */
  desired(model: string, quantization: Quantization, pool: Pool): number;
}
