// What the instance service needs from the rest of the control plane, as two small
// interfaces: the GPUs nodes report (node registry) and a way to send tasks to agents
// (agent gateway). Keeping them here keeps the service free of gRPC and registry details.
import type { CandidateNode } from './placement.js';
import type { TaskResources } from './sku-catalog.js';

export interface GpuInventory {
  /** Every node with its GPUs as the registry sees them (claimed GPUs marked). */
  nodes(): Promise<CandidateNode[]>;
}

export interface StartTaskOrder {
  taskId: string;
  image: string;
  gpuUuids: string[];
  labels: Record<string, string>;
  env: Record<string, string>;
  sshAuthorizedKeys: string[];
  /** Container limits from the SKU catalog; null when the SKU left the catalog (the agent then gives the host's capacity). */
  resources: TaskResources | null;
}

export interface StopTaskOrder {
  taskId: string;
  /** Grace between SIGTERM and SIGKILL; 0 with force. */
  timeoutMs: number;
  force: boolean;
}

export interface TaskDispatcher {
  /** Sends the order to the node's live session; false when the node has none right now. */
  startTask(nodeId: string, order: StartTaskOrder): boolean;
  stopTask(nodeId: string, order: StopTaskOrder): boolean;
}

/** The task states agents report (proto TaskState.state); `unhealthy` and `restarting` are replicas' only. */
export type AgentTaskState = 'pulling' | 'starting' | 'running' | 'unhealthy' | 'restarting' | 'stopping' | 'exited' | 'failed' | 'gone';

/** States of a task whose container holds its GPUs (or is about to): a task that ended here is killed when its node reports one. */
export const ALIVE_TASK_STATES: ReadonlySet<string> = new Set<AgentTaskState>(['pulling', 'starting', 'running', 'unhealthy', 'restarting']);
