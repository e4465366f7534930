// The part of the store that keeps instances, their GPU claims and the charges ledger.
// Every status change goes through `transition`, which checks the expected current
// status, writes the change and appends its `instance.lifecycle` event in one
// transaction; GPUs are claimed and released in the same transactions.
import type { ChargeRecord, InstanceRecord, TransitionCharge } from '../instances/instance-record.js';
import { TERMINAL, type InstanceStatus } from '../instances/lifecycle.js';
import type { EventRecord, IdempotencyCompletion } from './records.js';
import type { AccountAdmission } from './ledger-store.js';

export class GpuAlreadyClaimed extends Error {
  constructor(readonly gpuUuid: string) {
    super(`GPU ${gpuUuid} is already claimed`);
    this.name = 'GpuAlreadyClaimed';
  }
}

/** The org's instances would hold more GPUs than its quota; nothing was written. */
export class OrgGpuQuotaExceeded extends Error {
  constructor(
    readonly held: number,
    readonly quota: number,
  ) {
    super(`the organization's instances hold ${held} GPUs of its quota of ${quota}`);
    this.name = 'OrgGpuQuotaExceeded';
  }
}

/** The GPUs an org's instances that are not ended hold (what a GPU quota limits); `org` is the engine's placeholder. */
export const heldGpusQuery = (org: string): string =>
  `SELECT COALESCE(SUM(gpus), 0) AS held FROM instances WHERE org_id = ${org} AND status NOT IN (${[...TERMINAL].map((s) => `'${s}'`).join(', ')})`;

export interface InstancePage {
  data: InstanceRecord[];
  hasMore: boolean;
}

/**
 * The idempotent answer to a request, from the instance as written; stored in the same
 * transaction (a claim taken over by another request fails it). Null: nothing to store.
 */
export type AnswerWith = (instance: InstanceRecord) => IdempotencyCompletion | null;

export interface InstanceStore {
  /**
   * Inserts the instance with its GPU claims (and an up-front charge); throws GpuAlreadyClaimed
   * on a race, and OrgGpuQuotaExceeded when the org's instances that are not ended would then
   * hold more than `gpuQuota` GPUs (checked in the same transaction, so concurrent creates on
   * any replica cannot pass it together). `upFront` admits its charge (see AccountAdmission).
   */
  create(instance: InstanceRecord, event: EventRecord, charge: ChargeRecord | null, answer?: AnswerWith, gpuQuota?: number, upFront?: AccountAdmission): Promise<void>;
  get(id: string): Promise<InstanceRecord | undefined>;
  /** Newest first; `after` is the id of the last instance of the previous page. */
  list(orgId: string, options: { statuses?: InstanceStatus[]; limit: number; after?: string }): Promise<InstancePage>;
  /** Instances on a node that are not terminal, for reconciliation with what the agent runs. */
  listActiveOnNode(nodeId: string): Promise<InstanceRecord[]>;
  listActive(): Promise<InstanceRecord[]>;
  /**
   * Moves `id` from `from` to `next.status` if it is still `from`; returns the updated
   * record, or undefined when the status had changed meanwhile. Terminal statuses
   * release the instance's GPU claims. `expiredBy` (an expiry): only if the reservation's
   * `expires_at` is at or before it, so an extension committed meanwhile keeps it running.
   */
  transition(
    id: string,
    from: InstanceStatus,
    next: Partial<InstanceRecord> & { status: InstanceStatus; updatedAt: number },
    event: (updated: InstanceRecord) => EventRecord,
    charge: TransitionCharge | null,
    expiredBy?: number,
  ): Promise<InstanceRecord | undefined>;
  /**
   * Adds `extension.hours` to reservation `id` (its duration and its expiry) with its charge
   * and idempotent answer, in one transaction, only while it is a reservation that is not
   * ending (draining, terminated, failed), has not expired at `extension.now`, and stays
   * within `extension.maxTotalHours` in all; undefined, and nothing written, otherwise.
   * Concurrent extensions each add their own hours. `upFront` admits its charge (see
   * AccountAdmission); a refusal throws, and nothing is written.
   */
  extend(id: string, extension: { hours: number; maxTotalHours: number; now: number }, charge: ChargeRecord, answer?: AnswerWith, upFront?: AccountAdmission): Promise<InstanceRecord | undefined>;
  /**
   * Bills on-demand instance `id`, if it is still ready or draining, up to `totalSeconds`
   * since it became ready: one `on_demand` line (billing/accrual.ts) for the seconds not
   * billed yet, written with the instance's new billed mark in one transaction. The mark
   * only moves forward (a compare-and-set), so a repeat, or a second replica at the same
   * boundary, bills nothing. Returns the line, or undefined when nothing was owed.
   */
  accrueOnDemand(id: string, totalSeconds: number, line: { id: string; createdAt: number }): Promise<ChargeRecord | undefined>;
  /** Changes that are not a status (progress, stop request, access endpoints): no event. */
  update(
    id: string,
    patch: Partial<Pick<InstanceRecord, 'progress' | 'stop' | 'access' | 'updatedAt'>>,
    charge?: ChargeRecord | null,
    answer?: AnswerWith,
  ): Promise<InstanceRecord | undefined>;
  claimedGpuUuids(): Promise<Set<string>>;
  listCharges(orgId: string, options: { limit: number; after?: string }): Promise<{ data: ChargeRecord[]; hasMore: boolean }>;
  chargesFor(instanceId: string): Promise<ChargeRecord[]>;
}
