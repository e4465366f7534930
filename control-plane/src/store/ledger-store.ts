// The part of the store that reads the ledger (compute charges, inference usage and
// credits as one list of lines) and keeps each org's billing account: prepaid or
// postpaid, credit limit, low-balance threshold and running totals.
import type { Dimension, HourRow, LedgerLine } from '../billing/ledger.js';
import type { CreditLine, InvoiceDraft } from '../billing/invoice.js';
import type { InstanceStatus } from '../instances/lifecycle.js';

export type BillingMode = 'prepaid' | 'postpaid';

export interface BillingAccount {
  orgId: string;
  mode: BillingMode;
  /** Postpaid: the most one month's bill may reach before new billable work is refused; null = no limit. */
  creditLimitNanos: number | null;
  /** A billing.balance_low event is sent when the balance falls below this; null = never. */
  lowBalanceNanos: number | null;
  /** Everything billed so far (charges and inference, refunds netted). */
  spentNanos: number;
  /** Every credit given (grants, SLA credit-back). */
  creditedNanos: number;
  /** The net bill (credits netted) of the period asked for. */
  periodNanos: number;
}

/**
 * A check of an org's account made inside the transaction that changes its money (an
 * up-front charge, a grant): the store takes the org's lock, reads the account and calls
 * `admit`, which throws to refuse (nothing is written); the lock is held to the commit.
 * Changes sent at once, on any replica, are so admitted one after the other, each seeing
 * those before it.
 */
export interface AccountAdmission {
  /** The month ('YYYY-MM') whose bill a credit limit applies to. */
  period: string;
  admit(account: BillingAccount): void;
}

export interface CreditRecord {
  id: string;
  orgId: string;
  kind: 'grant' | 'sla_credit';
  /** Positive: what the customer is given. */
  amountNanos: number;
  instanceId: string | null;
  /** 'YYYY-MM' an SLA credit is for; an instance gets at most one per month. */
  period: string | null;
  description: string;
  createdBy: string | null;
  createdAt: number;
}

/** An instance as the SLA reads it. */
export interface SlaInstance {
  id: string;
  orgId: string;
  mode: 'on_demand' | 'reserved';
  nodeId: string | null;
  gpuUuids: string[];
  gpus: number;
  rateMicros: number;
  readyAt: number | null;
  /** When it stopped being served; null while it runs. */
  endedAt: number | null;
  expiresAt: number | null;
  /** On-demand: how many of its seconds since `ready` its lines bill (net of seconds given back at its end); 0 for reservations. */
  billedSeconds: number;
  status: InstanceStatus;
  /** When it left `ready` (for draining or its end); null while ready, or never ready. */
  leftReadyAt: number | null;
  /**
   * It left `ready` for its end without anyone asking: straight to terminated or failed
   * (its process exited, its node was forgotten), or drained because its node came back
   * without the container (that transition carries a reason; a terminate or an expiry
   * does not).
   */
  leftReadyUnasked: boolean;
  /** An operator terminated it (the operator audit trail says so): its end is the provider's doing. */
  terminatedByOperator: boolean;
}

export interface StoredInvoice extends InvoiceDraft {
  id: string;
  number: string;
  finalizedAt: number;
}

export interface LedgerStore {
  /** The org's lines with `from <= created_at < to`, oldest first, at most `limit` after the line `after`. */
  lines(orgId: string, range: { from: number; to: number }, page: { limit: number; after?: { createdAt: number; id: string } }): Promise<LedgerLine[]>;
  /** Sums the org's lines in the range by UTC hour and the given dimensions. */
  hourly(orgId: string, range: { from: number; to: number }, dimensions: readonly Dimension[]): Promise<HourRow[]>;
  /** Appends a credit; false when an SLA credit for that instance and month exists already. `admission` may refuse it (see AccountAdmission). */
  addCredit(credit: CreditRecord, admission?: AccountAdmission): Promise<boolean>;
  /** The org's account, with the net bill of `period` ('YYYY-MM'). */
  account(orgId: string, period: string): Promise<BillingAccount>;
  credits(orgId: string, range: { from: number; to: number }): Promise<CreditLine[]>;
  /** Orgs with at least one ledger line in the range. */
  orgsWithLines(range: { from: number; to: number }): Promise<string[]>;
  /** Stores `draft` as final with the next invoice number; undefined when the org's invoice for that period exists already. */
  finalizeInvoice(id: string, draft: InvoiceDraft, numberFor: (sequence: number) => string, at: number): Promise<StoredInvoice | undefined>;
  listInvoices(orgId: string): Promise<StoredInvoice[]>;
  getInvoice(orgId: string, id: string): Promise<StoredInvoice | undefined>;
  /** Instances that were ready at some moment of [from, to), or one by id. */
  slaInstances(range: { from: number; to: number } | { instanceId: string }): Promise<SlaInstance[]>;
  setAccount(orgId: string, patch: Partial<Pick<BillingAccount, 'mode' | 'creditLimitNanos' | 'lowBalanceNanos'>>): Promise<void>;
}
