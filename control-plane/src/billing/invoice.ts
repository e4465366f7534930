// A month's invoice as a customer reads it, drafted from the ledger: compute grouped by
// SKU and kind, inference by model, credits one by one. Pure: the store supplies the
// month's sums and credit lines; finalizing stores the result, numbered, for good.
import type { RollupRow } from './ledger.js';
import type { BillingPeriod } from './periods.js';

export type InvoiceSection = 'compute' | 'inference' | 'credits';

export interface InvoiceItem {
  section: InvoiceSection;
  description: string;
  quantity: number;
  unit: 'gpu_hour' | 'request' | 'credit';
  /** Exact, in nano-dollars; negative for money back. */
  amountNanos: number;
  /** Inference only. */
  inputTokens?: number;
  outputTokens?: number;
}

export interface InvoiceDraft {
  orgId: string;
  period: string;
  periodStart: number;
  periodEnd: number;
  items: InvoiceItem[];
  /** Charges (compute and inference, refunds netted). */
  subtotalNanos: number;
  /** Credits applied (negative or zero). */
  creditsNanos: number;
  totalNanos: number;
  /** Credit left over from earlier invoices (their totals below zero), applied to this one first; absent on invoices finalized before it was carried. */
  creditAppliedNanos?: number;
  /** Credit this invoice leaves for the next: what was carried in and not used, and this total below zero. */
  creditCarriedForwardNanos?: number;
  /** What the customer owes, in cents, rounded half up from the exact total less the credit carried in; never below zero. */
  amountDueCents: number;
}

export interface CreditLine {
  id: string;
  kind: 'grant' | 'sla_credit';
  amountNanos: number;
  description: string;
  createdAt: number;
}

const COMPUTE_KIND: Record<string, string> = {
  on_demand: 'on-demand',
  reservation: 'reservations',
  extension: 'reservation extensions',
  refund: 'refunds of failed provisions',
};

const gpuHours = (gpuSeconds: number): number => Math.round((gpuSeconds / 3600) * 1e6) / 1e6;

/** Nano-dollars to cents, half up, exact in integers. */
export function nanosToCents(nanos: number): number {
  const sign = nanos < 0 ? -1 : 1;
  return sign * Math.floor((Math.abs(nanos) + 5_000_000) / 10_000_000);
}

/**
 * The credit an org carries into a month from its earlier invoices' totals, oldest first:
 * a month whose total is below zero (a prepaid grant, an SLA credit larger than the bill)
 * leaves the rest for the next, and a month with charges uses what is carried first. Before,
 * each invoice stopped at zero and the rest was never applied: a prepaid org that used $100
 * of a $1,000 grant in each of two months was asked $100 for the second.
 */
export function creditCarriedIn(earlierTotalsNanos: readonly number[]): number {
  let carried = 0;
  for (const total of earlierTotalsNanos) carried = Math.max(0, carried - total);
  return carried;
}

/**
 * `rows`: the month rolled up by `kind`, `sku` and `model` (one bucket). `credits`: the
 * month's credit lines; `carriedInNanos`: creditCarriedIn of the org's earlier invoices.
 * Items are ordered as a customer reads them.
 */
export function draftInvoice(orgId: string, period: BillingPeriod, rows: readonly RollupRow[], credits: readonly CreditLine[], carriedInNanos = 0): InvoiceDraft {
  const compute: InvoiceItem[] = [];
  const inference: InvoiceItem[] = [];
  for (const row of rows) {
    const kind = row.group.kind ?? '';
    if (kind === 'inference') {
      inference.push({
        section: 'inference',
        description: `${row.group.model ?? 'unknown model'}`,
        quantity: row.requests,
        unit: 'request',
        amountNanos: row.amountNanos,
        inputTokens: row.inputTokens,
        outputTokens: row.outputTokens,
      });
    } else if (kind in COMPUTE_KIND) {
      compute.push({ section: 'compute', description: `${row.group.sku ?? 'GPU'} ${COMPUTE_KIND[kind]}`, quantity: gpuHours(row.gpuSeconds), unit: 'gpu_hour', amountNanos: row.amountNanos });
    }
  }
  const byText = (a: InvoiceItem, b: InvoiceItem) => (a.description < b.description ? -1 : a.description > b.description ? 1 : 0);
  compute.sort(byText);
  inference.sort(byText);
  const creditItems: InvoiceItem[] = [...credits]
    .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1))
    .map((c) => ({ section: 'credits', description: c.description, quantity: 1, unit: 'credit', amountNanos: -c.amountNanos }));
  const items = [...compute, ...inference, ...creditItems];
  const subtotalNanos = [...compute, ...inference].reduce((s, i) => s + i.amountNanos, 0);
  const creditsNanos = creditItems.reduce((s, i) => s + i.amountNanos, 0);
  const totalNanos = subtotalNanos + creditsNanos;
  const creditAppliedNanos = Math.min(carriedInNanos, Math.max(0, totalNanos));
  return {
    orgId,
    period: period.id,
    periodStart: period.start,
    periodEnd: period.end,
    items,
    subtotalNanos,
    creditsNanos,
    totalNanos,
    creditAppliedNanos,
    creditCarriedForwardNanos: Math.max(0, carriedInNanos - totalNanos),
    amountDueCents: Math.max(0, nanosToCents(totalNanos - creditAppliedNanos)),
  };
}

/** Invoice numbers: the period and a sequence across the provider, e.g. INV-202611-000042. */
export function invoiceNumber(period: string, sequence: number): string {
  return `INV-${period.replace('-', '')}-${String(sequence).padStart(6, '0')}`;
}
