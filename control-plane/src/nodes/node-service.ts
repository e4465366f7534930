// What operators and the scheduler ask of the node registry, answered from the store so
// it works in svcctl (another process) as well as in the server: list and show nodes,
// cordon / uncordon / drain, queue a GPU health reset for the agent, and the
// schedulability query. The server flushes telemetry every report interval, so reads are
// at most one interval old; health events and status changes are written at once.
import { ApiError, newId, type Clock } from '@svc/shared';
import type { GpuRecord, NodeCommandRecord, NodeRecord, NodeStore, StoredHealthEvent } from '../store/node-store.js';
import { candidateNodes, schedulableGpus, type CandidateNodeFacts, type GpuQuery, type SchedulableNode } from './schedulability.js';

export interface NodeDetail {
  node: NodeRecord;
  gpus: GpuRecord[];
  timeline: StoredHealthEvent[];
  commands: NodeCommandRecord[];
}

export const DEFAULT_TIMELINE_LIMIT = 20;

export class NodeService {
  constructor(
    private readonly nodes: NodeStore,
    private readonly clock: Clock,
  ) {}

  /** A node by id, or by hostname when exactly one node has it. */
  async resolve(ref: string): Promise<NodeRecord> {
    const byId = await this.nodes.getNode(ref);
    if (byId) return byId;
    const byName = (await this.nodes.listNodes()).filter((n) => n.hostname === ref);
    if (byName.length === 1) return byName[0]!;
    if (byName.length > 1) {
      throw new ApiError('invalid_request', `${byName.length} nodes have hostname ${ref} (${byName.map((n) => n.id).join(', ')}); use the node id`);
    }
    throw new ApiError('not_found', `no node with id or hostname ${ref}`);
  }

  async list(): Promise<Array<{ node: NodeRecord; gpus: GpuRecord[] }>> {
    const [nodes, gpus] = await Promise.all([this.nodes.listNodes(), this.nodes.listGpus()]);
    const byNode = new Map<string, GpuRecord[]>();
    for (const gpu of gpus) byNode.set(gpu.nodeId, [...(byNode.get(gpu.nodeId) ?? []), gpu]);
    return nodes.map((node) => ({ node, gpus: byNode.get(node.id) ?? [] }));
  }

  async show(ref: string, timelineLimit = DEFAULT_TIMELINE_LIMIT): Promise<NodeDetail> {
    const node = await this.resolve(ref);
    const [gpus, timeline, commands] = await Promise.all([
      this.nodes.listGpus(node.id),
      this.nodes.listHealthEvents(node.id, timelineLimit),
      this.nodes.listCommands({ nodeId: node.id, limit: 100 }),
    ]);
    return { node, gpus, timeline, commands: commands.filter((c) => c.state === 'pending' || c.state === 'sent') };
  }

  /** No new work is placed on a cordoned node; what runs there keeps running. */
  cordon(ref: string): Promise<NodeRecord> {
    return this.setFlags(ref, { cordoned: true });
  }

  /** Clears both cordon and drain. */
  uncordon(ref: string): Promise<NodeRecord> {
    return this.setFlags(ref, { cordoned: false, draining: false });
  }

  /**
   * Cordons the node and marks it draining: the instances issue moves or ends its work.
   * The flag is the contract; nothing else happens here yet.
   */
  drain(ref: string): Promise<NodeRecord> {
    return this.setFlags(ref, { cordoned: true, draining: true });
  }

  private async setFlags(ref: string, flags: { cordoned?: boolean; draining?: boolean }): Promise<NodeRecord> {
    const node = await this.resolve(ref);
    return (await this.nodes.setFlags(node.id, flags))!;
  }

  /**
   * Queues a ResetGpuHealth command; the server sends it on the node's live session
   * (it polls the store about once a second) and records the agent's answer.
   */
  async requestGpuHealthReset(ref: string, gpuUuid = ''): Promise<NodeCommandRecord> {
    const node = await this.resolve(ref);
    if (gpuUuid) {
      const gpus = await this.nodes.listGpus(node.id);
      const match = gpus.filter((g) => g.uuid === gpuUuid || g.uuid.startsWith(gpuUuid) || String(g.index) === gpuUuid);
      if (match.length !== 1) {
        const known = gpus.map((g) => `${g.index}:${g.uuid}`).join(', ') || 'none reported';
        throw new ApiError('not_found', `node ${node.id} has no GPU matching ${gpuUuid} (GPUs: ${known})`, { param: 'gpu' });
      }
      gpuUuid = match[0]!.uuid;
    }
    const command: NodeCommandRecord = {
      id: newId('cmd'),
      nodeId: node.id,
      kind: 'reset_gpu_health',
      args: { gpuUuid },
      state: 'pending',
      createdAt: this.clock.now(),
      sentAt: null,
      finishedAt: null,
      errorCode: null,
      errorMessage: null,
    };
    await this.nodes.createCommand(command);
    return command;
  }

  async getCommand(id: string): Promise<NodeCommandRecord> {
    const command = await this.nodes.getCommand(id);
    if (!command) throw new ApiError('not_found', `no node command with id ${id}`);
    return command;
  }

  /** Every node with its GPUs' facts, for instances/placement.ts. */
  async candidates(): Promise<CandidateNodeFacts[]> {
    const [nodes, gpus, claims] = await Promise.all([this.nodes.listNodes(), this.nodes.listGpus(), this.nodes.listClaims()]);
    return candidateNodes(nodes, gpus, new Set(claims.map((c) => c.gpuUuid)));
  }

  /** Healthy free GPUs of a model (in a pool), per schedulable node. */
  async schedulable(query: GpuQuery): Promise<SchedulableNode[]> {
    return schedulableGpus(await this.candidates(), query);
  }
}
