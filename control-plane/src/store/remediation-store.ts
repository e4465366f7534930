// The remediation's part of the store: one row per remediation (a GPU or node fault the
// control plane acts on) and the cursor over the health timeline it has read. Every step
// is one unit of work: the row's new stage, its timeline rows, the webhook events, the
// reset command and the node's flags commit together, so a control plane that restarts
// resumes each remediation where it stood and repeats no step.
import type { XidAction } from '@svc/shared';
import type { RemediationKind, RemediationStage } from '../remediation/remediation-policy.js';
import type { EventRecord } from './records.js';
import type { HealthEventRecord, NodeCommandRecord, StoredHealthEvent } from './node-store.js';

export interface RemediationRecord {
  id: string;
  nodeId: string;
  /** Null for a remediation of the whole node that no one GPU started. */
  gpuUuid: string | null;
  gpuIndex: number | null;
  /** The XID that started it; null for an uncorrectable ECC error reported without one. */
  xid: number | null;
  /** NVIDIA's bucket for the fault. */
  action: XidAction;
  kind: Exclude<RemediationKind, 'timeline'>;
  stage: RemediationStage;
  /** What happened, in NVIDIA's words ("XID 48: double-bit ECC error"). */
  fault: string;
  /** The latest step, as the timeline says it. */
  detail: string;
  /** The reset command, once one was sent. */
  commandId: string | null;
  /** What held the GPU when last looked at (instance and replica ids). */
  holders: string[];
  /** The timeline row (seq) that started it. */
  triggerSeq: number;
  openedAt: number;
  updatedAt: number;
  closedAt: number | null;
  outcome: string | null;
}

/** One step, committed at once. */
export interface RemediationChange {
  /** Health-timeline rows up to this seq have been read. */
  cursor?: number;
  records?: RemediationRecord[];
  timeline?: HealthEventRecord[];
  events?: EventRecord[];
  command?: NodeCommandRecord;
  /** Cordon and drain this node (reboot-class faults). */
  drainNode?: string;
}

export interface RemediationStore {
  cursor(): Promise<number>;
  /** Timeline rows after `seq`, oldest first. */
  healthEventsAfter(seq: number, limit: number): Promise<StoredHealthEvent[]>;
  listOpen(): Promise<RemediationRecord[]>;
  /** Newest first; a node's, a GPU's, or every one. */
  list(filter: { nodeId?: string; gpuUuid?: string; limit: number }): Promise<RemediationRecord[]>;
  apply(change: RemediationChange): Promise<void>;
}
