// An instance as the control plane keeps it. Times are epoch milliseconds; money is
// integer micro-dollars.
import type { Pool } from '../models/catalog.js';
import type { InstanceStatus } from './lifecycle.js';
import type { StopRequest } from './stop-request.js';

export type InstanceMode = 'on_demand' | 'reserved';

export interface InstanceRecord {
  id: string;
  orgId: string;
  keyId: string | null;
  status: InstanceStatus;
  failureReason: string | null;
  sku: string;
  gpus: number;
  pool: Pool;
  mode: InstanceMode;
  durationHours: number | null;
  image: string;
  sshKeys: string[];
  labels: Record<string, string>;
  nodeId: string | null;
  gpuUuids: string[];
  /** Per GPU-hour at booking (reservations: the tier rate they were booked at). */
  rateMicros: number;
  /** While provisioning/starting: what the agent is doing and how far (0..1). */
  progress: { phase: string; fraction: number | null } | null;
  createdAt: number;
  readyAt: number | null;
  expiresAt: number | null;
  terminatedAt: number | null;
  /** The stop asked of its container (terminate, expiry), kept until the node reports it gone. */
  stop: StopRequest | null;
  /** How users reach it, as its node reported from `running` on; null before (and from older agents). */
  access: InstanceAccessRecord | null;
  updatedAt: number;
}

export interface InstanceAccessRecord {
  ssh: { host: string; port: number; user: string; hostKey: string; hostKeyFingerprint: string } | null;
  jupyter: { url: string; token: string } | null;
  /** Why `jupyter` is null (the image has no Jupyter, it did not start, ...). */
  jupyterUnavailableReason: string | null;
}

/** `refund` is a credit (negative amount): the ledger is append-only, so money comes back as a line of its own. */
export type ChargeKind = 'reservation' | 'extension' | 'on_demand' | 'refund';

export interface ChargeRecord {
  id: string;
  orgId: string;
  instanceId: string;
  kind: ChargeKind;
  amountMicros: number;
  description: string;
  createdAt: number;
}

/**
 * A credit of everything charged for the instance so far, as one `refund` line. The store
 * sums the instance's charges inside the transaction that writes it, so an extension
 * committed just before is refunded too.
 */
export interface RefundRecord {
  refund: true;
  id: string;
  orgId: string;
  instanceId: string;
  description: string;
  createdAt: number;
}

/**
 * The end of an on-demand run: `seconds` it is billed for in all (at least 60). The store
 * writes one `on_demand` line for what hourly and month-end accruals have not billed
 * already (billing/accrual.ts), reading and moving the instance's billed mark inside the
 * transaction that writes it, so an accrual committed just before is not billed twice.
 */
export interface OnDemandEnd {
  onDemandSeconds: number;
  id: string;
  orgId: string;
  instanceId: string;
  createdAt: number;
}

/** What a transition may write to the ledger. */
export type TransitionCharge = ChargeRecord | RefundRecord | OnDemandEnd;
