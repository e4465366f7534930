// A model-server replica as the control plane keeps it: where it was placed, the start
// order the agent gets (so a re-sent start is the same start), and what the agent last
// reported. Times are epoch milliseconds.
import type { Engine, Pool, Quantization } from '../models/catalog.js';
import type { ReplicaStatus } from './replica-status.js';

export interface ReplicaRecord {
  id: string;
  model: string;
  quantization: Quantization;
  pool: Pool;
  nodeId: string;
  /** GPUs claimed in gpu_claims (owner = replica id); empty for the CPU engine. */
  gpuUuids: string[];
  engine: Engine;
  image: string;
  args: string[];
  env: Record<string, string>;
  containerPort: number;
  healthPath: string;
  status: ReplicaStatus;
  /** host:port the agent published the server on; null until known. */
  endpoint: string | null;
  /** The agent's latest explanation (exit code, health failure, pull error); '' when none. */
  message: string;
  /** Times the agent restarted the container, or the start was ordered again. */
  restarts: number;
  createdAt: number;
  /** First time it passed a health check. */
  readyAt: number | null;
  /** The last status (or endpoint/message) change. */
  changedAt: number;
  endedAt: number | null;
}
