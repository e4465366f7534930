// What the replica service needs to reach agents: start and stop orders for a node's
// live session (AgentTaskDispatcher implements it over the gateway), kept as a small
// interface so the service has no gRPC in it.

export interface StartReplicaOrder {
  replicaId: string;
  image: string;
  /** The server's arguments (the container command; the image's entrypoint is the server). */
  args: string[];
  env: Record<string, string>;
  labels: Record<string, string>;
  gpuUuids: string[];
  containerPort: number;
  healthPath: string;
}

export interface ReplicaDispatcher {
  /** False when the node has no live session right now. */
  startReplica(nodeId: string, order: StartReplicaOrder): boolean;
  stopReplica(nodeId: string, order: { replicaId: string; timeoutMs: number; force: boolean }): boolean;
}
