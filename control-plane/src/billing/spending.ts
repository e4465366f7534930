// Whether an org may start new billable work, and when it is told its balance runs low.
// Pure rules over its billing account; BalanceGuard applies them on the billable routes.
import { ApiError, type Clock } from '@svc/shared';
import type { AccountAdmission, BillingAccount, LedgerStore } from '../store/ledger-store.js';
import { billingPeriod } from './periods.js';

export type SpendingDecision = { allowed: true } | { allowed: false; message: string };

const usd = (nanos: number): string => `$${(nanos / 1e9).toFixed(2)}`;

export function spendingDecision(account: BillingAccount): SpendingDecision {
  const balance = account.creditedNanos - account.spentNanos;
  if (account.mode === 'prepaid' && balance <= 0) {
    return { allowed: false, message: `your organization's prepaid balance is ${usd(balance)}; add credit to start new billable work (GET /v1/billing/balance shows it)` };
  }
  if (account.mode === 'postpaid' && account.creditLimitNanos !== null && account.periodNanos >= account.creditLimitNanos) {
    return {
      allowed: false,
      message: `your organization's bill this month (${usd(account.periodNanos)}) reached its credit limit of ${usd(account.creditLimitNanos)}; ask your provider to raise it`,
    };
  }
  return { allowed: true };
}

/**
 * Whether an org may be charged `chargeNanos` up front (a reservation, an extension): the
 * amount is known before it is charged, so a prepaid balance must cover it, and a
 * postpaid month stay within its credit limit with it; null when it may.
 */
export function upFrontRefusal(account: BillingAccount, chargeNanos: number): string | null {
  const balance = account.creditedNanos - account.spentNanos;
  if (account.mode === 'prepaid' && balance - chargeNanos < 0) {
    return `this costs ${usd(chargeNanos)} up front, more than your organization's prepaid balance of ${usd(balance)}; add credit or book fewer hours (GET /v1/billing/balance shows it)`;
  }
  if (account.mode === 'postpaid' && account.creditLimitNanos !== null && account.periodNanos + chargeNanos > account.creditLimitNanos) {
    return `this costs ${usd(chargeNanos)} up front, which would take your organization's bill this month (${usd(account.periodNanos)}) past its credit limit of ${usd(account.creditLimitNanos)}; book fewer hours, or ask your provider to raise it`;
  }
  return null;
}

/** True when the balance moved from at or above the threshold to below it. */
export function crossedLowBalance(before: BillingAccount | undefined, after: BillingAccount): boolean {
  if (after.lowBalanceNanos === null || before === undefined) return false;
  const was = before.creditedNanos - before.spentNanos;
  const now = after.creditedNanos - after.spentNanos;
  return was >= after.lowBalanceNanos && now < after.lowBalanceNanos;
}

interface Cached {
  account: BillingAccount;
  decision: SpendingDecision;
  readAt: number;
}

/**
 * Refuses new billable work (inference with live keys, instance creation) of orgs that may
 * not spend. Accounts are read at most once per `maxAgeMs` per org, so a request past the
 * first pays a map lookup; work already admitted is never cut off. The cost of the
 * staleness is bounded: an org may overspend by what it can start in `maxAgeMs`.
 */
export class BalanceGuard {
  private readonly accounts = new Map<string, Cached>();
  private readonly reading = new Map<string, Promise<Cached>>();

  constructor(
    private readonly ledger: LedgerStore,
    private readonly clock: Clock,
    private readonly onLowBalance: (account: BillingAccount) => void,
    private readonly maxAgeMs = 1_000,
  ) {}

  /** Throws insufficient_quota when the org may not start billable work. */
  async check(orgId: string): Promise<void> {
    const cached = this.accounts.get(orgId);
    const fresh = cached && this.clock.now() - cached.readAt < this.maxAgeMs ? cached : await this.read(orgId);
    if (!fresh.decision.allowed) throw new ApiError('insufficient_quota', fresh.decision.message);
  }

  /**
   * The admission of a charge of `chargeNanos` up front: the store applies it to the org's
   * account as it is inside the transaction that writes the charge (money, not a cached
   * second-old view), under the org's lock, so charges sent at once never overdraw it
   * together; it throws insufficient_quota when the org may not be charged.
   */
  upFrontAdmission(chargeNanos: number): AccountAdmission {
    return {
      period: billingPeriod(this.clock.now()).id,
      admit(account) {
        const refusal = upFrontRefusal(account, chargeNanos);
        if (refusal) throw new ApiError('insufficient_quota', refusal);
      },
    };
  }

  /** Forgets what it read (a credit was just granted, a limit changed). */
  invalidate(orgId: string): void {
    this.accounts.delete(orgId);
  }

  private read(orgId: string): Promise<Cached> {
    let pending = this.reading.get(orgId);
    if (!pending) {
      pending = this.ledger
        .account(orgId, billingPeriod(this.clock.now()).id)
        .then((account) => {
          const before = this.accounts.get(orgId)?.account;
          if (crossedLowBalance(before, account)) this.onLowBalance(account);
          const cached = { account, decision: spendingDecision(account), readAt: this.clock.now() };
          this.accounts.set(orgId, cached);
          return cached;
        })
        .finally(() => this.reading.delete(orgId));
      this.reading.set(orgId, pending);
    }
    return pending;
  }
}
