// What the provider does to an org's billing account: grant credit, switch between
// prepaid and postpaid, set the credit limit and the low-balance threshold. Customers
// read their account (GET /v1/billing/balance); only operators change it.
import { ApiError, newId, type Clock } from '@svc/shared';
import type { AccountAdmission, BillingAccount, BillingMode, LedgerStore } from '../store/ledger-store.js';
import { billingPeriod } from './periods.js';
import type { BalanceGuard } from './spending.js';

/**
 * The most an org's credits, its credit limit or its low-balance threshold may be, in
 * nano-dollars: amounts are JS numbers, exact only up to 2^53 (about $9.0M). Past it a
 * total loses nano-dollars (SQLite) or cannot be read at all (PostgreSQL's int8 parser
 * refuses it), so what would go past it is refused before anything is written.
 */
export const MAX_ACCOUNT_NANOS = Number.MAX_SAFE_INTEGER;

const usdText = (nanos: number): string => (nanos / 1e9).toLocaleString('en-US', { style: 'currency', currency: 'USD' });

/** Dollars as given by a person (at most 9 decimals), as exact nano-dollars; at most MAX_ACCOUNT_NANOS. */
export function usdToNanos(text: string, param: string): number {
  const m = /^(\d{1,9})(?:\.(\d{1,9}))?$/.exec(text.trim());
  if (!m) throw new ApiError('invalid_request', `${param} must be an amount in USD such as 25 or 0.50`, { param });
  // BigInt: the sum of the parts as numbers would already be rounded past the range.
  const nanos = BigInt(m[1]!) * 1_000_000_000n + BigInt((m[2] ?? '').padEnd(9, '0'));
  if (nanos > BigInt(MAX_ACCOUNT_NANOS)) throw new ApiError('invalid_request', `${param} may be at most ${usdText(MAX_ACCOUNT_NANOS)}, the most an account can hold exactly`, { param });
  return Number(nanos);
}

/** Why a grant of `amountNanos` may not be given to `account`, or null when it may. */
export function grantRefusal(account: BillingAccount, amountNanos: number): string | null {
  if (amountNanos > MAX_ACCOUNT_NANOS - account.creditedNanos) {
    return `a credit of ${usdText(amountNanos)} would take this organization's credits from ${usdText(account.creditedNanos)} past the most an account can hold (${usdText(MAX_ACCOUNT_NANOS)}); grant at most ${usdText(Math.max(0, MAX_ACCOUNT_NANOS - account.creditedNanos))}`;
  }
  return null;
}

/** Why an account setting (credit limit, low-balance threshold) of `nanos` may not be set, or null when it may. */
export function settingRefusal(nanos: number | null | undefined, param: string): string | null {
  if (nanos === null || nanos === undefined) return null;
  if (!Number.isSafeInteger(nanos) || nanos < 0 || nanos > MAX_ACCOUNT_NANOS) return `${param} must be between $0 and ${usdText(MAX_ACCOUNT_NANOS)}, the most an account can hold exactly`;
  return null;
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
    // Checked in the transaction that writes it, under the org's lock: grants given at the
    // same moment are checked one after the other and never pass the range together.
    const admission: AccountAdmission = {
      period: billingPeriod(this.clock.now()).id,
      admit(account) {
        const refusal = grantRefusal(account, amountNanos);
        if (refusal) throw new ApiError('invalid_request', refusal, { param: 'usd' });
      },
    };
    await this.ledger.addCredit({ id: newId('credit'), orgId, kind: 'grant', amountNanos, instanceId: null, period: null, description, createdBy, createdAt: this.clock.now() }, admission);
    this.guard.invalidate(orgId);
    return this.account(orgId);
  }

  async configure(orgId: string, patch: { mode?: BillingMode; creditLimitNanos?: number | null; lowBalanceNanos?: number | null }): Promise<BillingAccount> {
    for (const [value, param] of [[patch.creditLimitNanos, 'credit_limit'], [patch.lowBalanceNanos, 'low_balance']] as const) {
      const refusal = settingRefusal(value, param);
      if (refusal) throw new ApiError('invalid_request', refusal, { param });
    }
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
