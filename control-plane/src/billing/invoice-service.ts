// Monthly invoices: the current month drafted live from the ledger, past months finalized
// once (numbered, stored, never changed). Finalizing runs after a month ends, on every
// replica; the store keeps one invoice per org and month, so it never doubles.
import { newId, type Clock } from '@svc/shared';
import type { LedgerStore, StoredInvoice } from '../store/ledger-store.js';
import { creditCarriedIn, draftInvoice, invoiceNumber, type InvoiceDraft } from './invoice.js';
import { rollup, type Dimension } from './ledger.js';
import type { BillingPeriod } from './periods.js';

const GROUPS: Dimension[] = ['kind', 'sku', 'model'];

export class InvoiceService {
  constructor(
    private readonly ledger: LedgerStore,
    private readonly clock: Clock,
    /** Writes queued usage records first, so a draft holds every request already answered. */
    private readonly flushUsage: () => Promise<void> = async () => {},
  ) {}

  async draft(orgId: string, period: BillingPeriod): Promise<InvoiceDraft> {
    await this.flushUsage();
    const range = { from: period.start, to: period.end };
    const rows = rollup(await this.ledger.hourly(orgId, range, GROUPS), GROUPS, 'month');
    const earlier = (await this.ledger.listInvoices(orgId)).filter((i) => i.periodEnd <= period.start).sort((a, b) => a.periodStart - b.periodStart);
    return draftInvoice(orgId, period, rows, await this.ledger.credits(orgId, range), creditCarriedIn(earlier.map((i) => i.totalNanos)));
  }

  /** Finalizes every org's invoice of `period` (a month that has ended); returns those newly finalized. */
  async finalize(period: BillingPeriod): Promise<StoredInvoice[]> {
    const done: StoredInvoice[] = [];
    for (const orgId of await this.ledger.orgsWithLines({ from: period.start, to: period.end })) {
      const stored = await this.ledger.finalizeInvoice(newId('in'), await this.draft(orgId, period), (n) => invoiceNumber(period.id, n), this.clock.now());
      if (stored) done.push(stored);
    }
    return done;
  }
}
