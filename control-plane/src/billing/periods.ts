// Billing periods are UTC calendar months: invoices, month-to-date totals and SLA
// availability all use the same boundaries.

export interface BillingPeriod {
  /** 'YYYY-MM' */
  id: string;
  start: number;
  /** Exclusive. */
  end: number;
}

export function billingPeriod(ms: number): BillingPeriod {
  const d = new Date(ms);
  const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const end = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  return { id: `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`, start, end };
}

/** The period named 'YYYY-MM', or null when the text is not one. */
export function parsePeriod(id: string): BillingPeriod | null {
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(id);
  return m ? billingPeriod(Date.UTC(Number(m[1]), Number(m[2]) - 1, 1)) : null;
}
