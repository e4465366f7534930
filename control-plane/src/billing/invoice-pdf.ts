// An invoice as a PDF a person would accept: issuer, customer, number, period, the
// items by section, and the totals. pdfkit writes it; amounts print in USD with cents
// (items to the cent as well; the exact nano-dollar amounts are in the JSON invoice).
import PDFDocument from 'pdfkit';
import type { InvoiceDraft, InvoiceItem } from './invoice.js';
import { nanosToCents } from './invoice.js';

export interface PdfInvoice extends InvoiceDraft {
  number: string | null;
  finalizedAt: number | null;
}

const money = (nanos: number): string => {
  const cents = nanosToCents(nanos);
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}$${Math.floor(abs / 100).toLocaleString('en-US')}.${String(abs % 100).padStart(2, '0')}`;
};
const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
const quantity = (item: InvoiceItem): string =>
  item.unit === 'gpu_hour'
    ? `${item.quantity.toLocaleString('en-US', { maximumFractionDigits: 2 })} GPU-h`
    : item.unit === 'request'
      ? `${item.quantity.toLocaleString('en-US')} req · ${(item.inputTokens ?? 0).toLocaleString('en-US')} in / ${(item.outputTokens ?? 0).toLocaleString('en-US')} out tokens`
      : '';

const SECTION_TITLES: Record<InvoiceItem['section'], string> = { compute: 'GPU compute', inference: 'Inference', credits: 'Credits' };

export function renderInvoicePdf(invoice: PdfInvoice, parties: { issuer: string; customer: string }): Promise<Buffer> {
  const doc = new PDFDocument({ size: 'A4', margin: 50, info: { Title: `Invoice ${invoice.number ?? 'draft'} ${invoice.period}`, Author: parties.issuer } });
  const chunks: Buffer[] = [];
  doc.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });

  const left = 50;
  const right = doc.page.width - 50;
  const amountX = right - 110;
  doc.font('Helvetica-Bold').fontSize(22).text(parties.issuer, left, 50);
  doc.font('Helvetica').fontSize(10).fillColor('#555').text(invoice.number ? 'INVOICE' : 'DRAFT INVOICE (not final)', left, 80);
  doc.fillColor('#000').fontSize(10);
  const meta: Array<[string, string]> = [
    ['Invoice number', invoice.number ?? '(assigned when finalized)'],
    ['Billed to', parties.customer],
    ['Period', `${day(invoice.periodStart)} to ${day(invoice.periodEnd - 1)} (UTC)`],
    ['Issued', invoice.finalizedAt ? day(invoice.finalizedAt) : 'not yet'],
  ];
  let y = 110;
  for (const [label, value] of meta) {
    doc.font('Helvetica-Bold').text(label, left, y, { width: 120 });
    doc.font('Helvetica').text(value, left + 130, y, { width: right - left - 130 });
    y += 16;
  }

  y += 14;
  for (const section of ['compute', 'inference', 'credits'] as const) {
    const items = invoice.items.filter((i) => i.section === section);
    if (items.length === 0) continue;
    doc.font('Helvetica-Bold').fontSize(12).text(SECTION_TITLES[section], left, y);
    y += 18;
    doc.moveTo(left, y - 3).lineTo(right, y - 3).strokeColor('#999').stroke();
    doc.fontSize(10);
    for (const item of items) {
      if (y > doc.page.height - 120) {
        doc.addPage();
        y = 50;
      }
      doc.font('Helvetica').text(item.description, left, y, { width: 220 });
      doc.fillColor('#555').text(quantity(item), left + 225, y, { width: amountX - left - 235 });
      doc.fillColor('#000').text(money(item.amountNanos), amountX, y, { width: 110, align: 'right' });
      y += Math.max(16, doc.heightOfString(item.description, { width: 220 }) + 4);
    }
    y += 10;
  }

  doc.moveTo(amountX - 120, y).lineTo(right, y).strokeColor('#000').stroke();
  y += 8;
  const totals: Array<[string, number, boolean]> = [
    ['Subtotal', invoice.subtotalNanos, false],
    ['Credits', invoice.creditsNanos, false],
    ['Total', invoice.totalNanos, true],
    ...(invoice.creditAppliedNanos ? ([['Credit from earlier invoices', -invoice.creditAppliedNanos, false]] as Array<[string, number, boolean]>) : []),
  ];
  for (const [label, nanos, bold] of totals) {
    doc.font(bold ? 'Helvetica-Bold' : 'Helvetica').text(label, amountX - 120, y, { width: 110 });
    doc.text(money(nanos), amountX, y, { width: 110, align: 'right' });
    y += 16;
  }
  doc.font('Helvetica-Bold').text('Amount due', amountX - 120, y, { width: 110 });
  doc.text(money(invoice.amountDueCents * 10_000_000), amountX, y, { width: 110, align: 'right' });
  doc.font('Helvetica').fontSize(8).fillColor('#555').text('Amounts in USD. Exact amounts (to 1e-9 USD) are in the JSON invoice; totals are rounded to the cent once.', left, doc.page.height - 70, { width: right - left });
  doc.end();
  return done;
}
