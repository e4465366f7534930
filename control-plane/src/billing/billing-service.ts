// What the provider does to an org's billing account: grant credit, switch between
// prepaid and postpaid, set the credit limit and the low-balance threshold. Customers
// read their account (GET /v1/billing/balance); only operators change it.
import { ApiError, newId, type Clock } from '@svc/shared';
import type { BillingAccount, BillingMode, LedgerStore } from '../store/ledger-store.js';
import { billingPeriod } from './periods.js';
import type { BalanceGuard } from './spending.js';

/** Dollars as given by a person (at most 9 decimals), as exact nano-dollars. */
export function usdToNanos(text: string, param: string): number {
  const m = /^(\d{1,9})(?:\.(\d{1,9}))?$/.exec(text.trim());
  if (!m) throw new ApiError('invalid_request', `${param} must be an amount in USD such as 25 or 0.50`, { param });
  return Number(m[1]) * 1e9 + Number((m[2] ?? '').padEnd(9, '0'));
}

export class BillingService {
  constructor(
    private readonly ledger: LedgerStore,
    private readonly clock: Clock,
    private readonly guard: BalanceGuard,
  ) {}

  account(orgId: string): Promise<BillingAccount> {
    return this.ledger.account(orgId, billingPeriod(this.clock.now()).id);
  }

  async grant(orgId: string, amountNanos: number, description: string, createdBy: string | null): Promise<BillingAccount> {
    if (!Number.isSafeInteger(amountNanos) || amountNanos <= 0) throw new ApiError('invalid_request', 'a credit must be a positive amount', { param: 'amount' });
    await this.ledger.addCredit({ id: newId('credit'), orgId, kind: 'grant', amountNanos, instanceId: null, period: null, description, createdBy, createdAt: this.clock.now() });
    this.guard.invalidate(orgId);
    return this.account(orgId);
  }

  async configure(orgId: string, patch: { mode?: BillingMode; creditLimitNanos?: number | null; lowBalanceNanos?: number | null }): Promise<BillingAccount> {
    await this.ledger.setAccount(orgId, patch);
    this.guard.invalidate(orgId);
    return this.account(orgId);
  }
}

/** An org's billing account as svcctl prints it with --json and the operator API sends it. */
export function billingAccountView(account: BillingAccount) {
  return {
    org_id: account.orgId,
    mode: account.mode,
    balance_nanos: account.creditedNanos - account.spentNanos,
    credited_nanos: account.creditedNanos,
    spent_nanos: account.spentNanos,
    month_to_date_nanos: account.periodNanos,
    credit_limit_nanos: account.creditLimitNanos,
    low_balance_nanos: account.lowBalanceNanos,
  };
}
