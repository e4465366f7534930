// The billing API (billing:read): the charges list, usage rollups over the whole ledger
// (JSON, or CSV with Accept: text/csv) and the credit balance.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiError } from '@svc/shared';
import { microsToUsd } from '../billing/pricing.js';
import { parseDimensions, rollup, rollupCsv, totals, type Bucket, type Quantities } from '../billing/ledger.js';
import { billingPeriod } from '../billing/periods.js';
import type { InstanceStore } from '../store/instance-store.js';
import type { LedgerStore, StoredInvoice } from '../store/ledger-store.js';
import type { InvoiceService } from '../billing/invoice-service.js';
import type { InvoiceDraft } from '../billing/invoice.js';
import { renderInvoicePdf } from '../billing/invoice-pdf.js';
import { responses, StringEnum } from '../http/schemas.js';
import { parseTimeParam } from '../http/time-param.js';
import { decodeUsageCursor, encodeUsageCursor, rowsAfter, sameQuery } from '../billing/usage-cursor.js';

export interface BillingRouteDeps {
  instances: InstanceStore;
  ledger: LedgerStore;
  invoices: InvoiceService;
  /** Who issues the invoices (the provider's name on the PDF). */
  issuer: string;
  orgName: (orgId: string) => Promise<string>;
  now: () => number;
  /** Writes queued usage records, so a read sees every request already answered. */
  flushUsage: () => Promise<void>;
}

const Charge = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('charge'),
    instance_id: Type.String(),
    kind: Type.String({ description: 'reservation, extension, on_demand, or refund (a credit: negative amount, e.g. a failed reservation)' }),
    amount: Type.Number({ description: 'USD' }),
    currency: Type.Literal('usd'),
    description: Type.String(),
    created_at: Type.String(),
  },
  { $id: 'Charge' },
);

const QuantityFields = {
  amount: Type.Number({ description: 'USD (negative: money back). Rounded for display; amount_nanos is exact.' }),
  amount_nanos: Type.Integer({ description: 'Exact amount in nano-dollars (1e-9 USD); sums of these match the ledger and invoices exactly.' }),
  input_tokens: Type.Integer(),
  output_tokens: Type.Integer(),
  gpu_seconds: Type.Integer({ description: 'GPU-seconds of compute (GPUs times seconds billed).' }),
  requests: Type.Integer({ description: 'Inference requests billed.' }),
};

const UsageBucket = Type.Object(
  {
    object: Type.Literal('billing.usage_bucket'),
    start: Type.String({ format: 'date-time' }),
    end: Type.String({ format: 'date-time' }),
    group: Type.Record(Type.String(), Type.Union([Type.String(), Type.Null()]), { description: 'One value per group_by dimension; null where a line has none (e.g. the model of a compute charge).' }),
    ...QuantityFields,
  },
  { $id: 'BillingUsageBucket' },
);

const Balance = Type.Object(
  {
    object: Type.Literal('billing.balance'),
    currency: Type.Literal('usd'),
    mode: StringEnum(['prepaid', 'postpaid'] as const),
    balance: Type.Number({ description: 'USD: credits given minus everything billed. Prepaid organizations may spend while it is above zero.' }),
    balance_nanos: Type.Integer(),
    credited: Type.Number({ description: 'USD of every credit given (grants, SLA credit-back).' }),
    spent: Type.Number({ description: 'USD of everything billed (compute and inference, refunds netted).' }),
    month_to_date: Type.Number({ description: "USD billed in the current UTC month, credits netted: this month's invoice so far." }),
    credit_limit: Type.Union([Type.Number(), Type.Null()], { description: "Postpaid: the most a month's bill may reach before new billable work is refused; null = no limit." }),
    low_balance_threshold: Type.Union([Type.Number(), Type.Null()], { description: 'A billing.balance_low webhook event is sent when the balance falls below this.' }),
  },
  { $id: 'BillingBalance' },
);

const InvoiceLine = Type.Object({
  section: StringEnum(['compute', 'inference', 'credits'] as const),
  description: Type.String(),
  quantity: Type.Number(),
  unit: StringEnum(['gpu_hour', 'request', 'credit'] as const),
  amount: Type.Number({ description: 'USD, rounded for display; amount_nanos is exact.' }),
  amount_nanos: Type.Integer(),
  input_tokens: Type.Optional(Type.Integer()),
  output_tokens: Type.Optional(Type.Integer()),
});

const Invoice = Type.Object(
  {
    id: Type.String({ description: "in_… for a finalized invoice; 'upcoming' for the current month's draft." }),
    object: Type.Literal('invoice'),
    status: StringEnum(['draft', 'final'] as const),
    number: Type.Union([Type.String(), Type.Null()], { description: 'INV-YYYYMM-NNNNNN, assigned when finalized.' }),
    period: Type.String({ description: 'The UTC month, YYYY-MM.' }),
    period_start: Type.String({ format: 'date-time' }),
    period_end: Type.String({ format: 'date-time' }),
    currency: Type.Literal('usd'),
    lines: Type.Array(InvoiceLine),
    subtotal: Type.Number(),
    subtotal_nanos: Type.Integer(),
    credits: Type.Number(),
    credits_nanos: Type.Integer(),
    total: Type.Number(),
    total_nanos: Type.Integer(),
    credit_applied: Type.Number({ description: 'Credit left over from earlier invoices (their totals below zero) applied to this total first.' }),
    credit_carried_forward: Type.Number({ description: 'Credit this invoice leaves for the next one.' }),
    amount_due: Type.Number({ description: 'USD to the cent: the total less the credit applied, rounded half up once, never below zero.' }),
    finalized_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'Invoice' },
);

const usd = (nanos: number): number => Math.round(nanos / 10) / 1e8;
const orNull = (nanos: number | null): number | null => (nanos === null ? null : usd(nanos));

function invoiceView(draft: InvoiceDraft, stored: StoredInvoice | null) {
  return {
    id: stored?.id ?? 'upcoming',
    object: 'invoice' as const,
    status: stored ? ('final' as const) : ('draft' as const),
    number: stored?.number ?? null,
    period: draft.period,
    period_start: new Date(draft.periodStart).toISOString(),
    period_end: new Date(draft.periodEnd).toISOString(),
    currency: 'usd' as const,
    lines: draft.items.map((i) => ({
      section: i.section,
      description: i.description,
      quantity: i.quantity,
      unit: i.unit,
      amount: usd(i.amountNanos),
      amount_nanos: i.amountNanos,
      ...(i.inputTokens !== undefined ? { input_tokens: i.inputTokens, output_tokens: i.outputTokens ?? 0 } : {}),
    })),
    subtotal: usd(draft.subtotalNanos),
    subtotal_nanos: draft.subtotalNanos,
    credits: usd(draft.creditsNanos),
    credits_nanos: draft.creditsNanos,
    total: usd(draft.totalNanos),
    total_nanos: draft.totalNanos,
    credit_applied: usd(draft.creditAppliedNanos ?? 0),
    credit_carried_forward: usd(draft.creditCarriedForwardNanos ?? Math.max(0, -draft.totalNanos)),
    amount_due: draft.amountDueCents / 100,
    finalized_at: stored ? new Date(stored.finalizedAt).toISOString() : null,
  };
}

function quantities(q: Quantities) {
  return { amount: usd(q.amountNanos), amount_nanos: q.amountNanos, input_tokens: q.inputTokens, output_tokens: q.outputTokens, gpu_seconds: q.gpuSeconds, requests: q.requests };
}

const MAX_HOURS: Record<Bucket, number> = { hour: 24 * 31, day: 24 * 400, month: 24 * 366 * 5 };
const PAGE_MAX = 1_000;
const CSV_MAX_ROWS = 100_000;

export function billingRoutes(deps: BillingRouteDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(Charge);
    app.addSchema(UsageBucket);
    app.addSchema(Balance);
    app.addSchema(Invoice);
    const tags = ['billing'];

    /** The org's invoice `id`: 'upcoming' drafts the current month live. */
    const findInvoice = async (orgId: string, id: string): Promise<{ draft: InvoiceDraft; stored: StoredInvoice | null }> => {
      if (id === 'upcoming') return { draft: await deps.invoices.draft(orgId, billingPeriod(deps.now())), stored: null };
      const stored = await deps.ledger.getInvoice(orgId, id);
      if (!stored) throw new ApiError('not_found', `no invoice ${id} in your organization`, { param: 'id' });
      return { draft: stored, stored };
    };
    const InvoiceParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

    app.get(
      '/billing/invoices',
      {
        config: { scope: 'billing:read' },
        schema: {
          tags,
          operationId: 'listInvoices', summary: "Your organization's invoices: the current month's live draft first, then finalized months, newest first",
          response: responses({ 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Type.Ref(Invoice)) }) }),
        },
      },
      async (request) => {
        const orgId = request.principal!.org.id;
        const upcoming = await deps.invoices.draft(orgId, billingPeriod(deps.now()));
        const finals = await deps.ledger.listInvoices(orgId);
        return { object: 'list' as const, data: [invoiceView(upcoming, null), ...finals.map((f) => invoiceView(f, f))] };
      },
    );

    app.get(
      '/billing/invoices/:id',
      {
        config: { scope: 'billing:read' },
        schema: { tags, operationId: 'getInvoice', summary: "One invoice ('upcoming': the current month's draft)", params: InvoiceParams, response: responses({ 200: Type.Ref(Invoice) }) },
      },
      async (request) => {
        const { draft, stored } = await findInvoice(request.principal!.org.id, request.params.id);
        return invoiceView(draft, stored);
      },
    );

    app.get(
      '/billing/invoices/:id/pdf',
      {
        config: { scope: 'billing:read' },
        schema: {
          tags,
          operationId: 'getInvoicePdf', summary: 'One invoice as a PDF document',
          params: InvoiceParams,
          produces: ['application/pdf'],
          response: responses({ 200: Type.String({ format: 'binary', description: 'application/pdf' }) }),
        },
      },
      async (request, reply) => {
        const orgId = request.principal!.org.id;
        const { draft, stored } = await findInvoice(orgId, request.params.id);
        const pdf = await renderInvoicePdf(
          { ...draft, number: stored?.number ?? null, finalizedAt: stored?.finalizedAt ?? null },
          { issuer: deps.issuer, customer: await deps.orgName(orgId) },
        );
        const name = stored?.number ?? `draft-${draft.period}`;
        return reply.type('application/pdf').header('content-disposition', `inline; filename="${name}.pdf"`).send(pdf);
      },
    );

    app.get(
      '/billing/charges',
      {
        config: { scope: 'billing:read' },
        schema: {
          tags,
          operationId: 'listCharges',
          summary: "List your organization's charges, newest first",
          querystring: Type.Object(
            { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })), after: Type.Optional(Type.String({ maxLength: 64 })) },
            { additionalProperties: false },
          ),
          response: responses({
            200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Type.Ref(Charge)), has_more: Type.Boolean(), next_cursor: Type.Union([Type.String(), Type.Null()]) }),
          }),
        },
      },
      async (request) => {
        const page = await deps.instances.listCharges(request.principal!.org.id, { limit: request.query.limit ?? 20, ...(request.query.after ? { after: request.query.after } : {}) });
        return {
          object: 'list' as const,
          data: page.data.map((c) => ({
            id: c.id,
            object: 'charge' as const,
            instance_id: c.instanceId,
            kind: c.kind,
            amount: microsToUsd(c.amountMicros),
            currency: 'usd' as const,
            description: c.description,
            created_at: new Date(c.createdAt).toISOString(),
          })),
          has_more: page.hasMore,
          next_cursor: page.hasMore ? page.data.at(-1)!.id : null,
        };
      },
    );

    app.get(
      '/billing/usage',
      {
        config: { scope: 'billing:read' },
        schema: {
          tags,
          operationId: 'getBillingUsage', summary: 'Usage rollups: your ledger (compute, inference, credits) summed by UTC hour, day or month and grouped as asked; CSV with Accept: text/csv',
          querystring: Type.Object(
            {
              from: Type.Optional(Type.String({ maxLength: 40, description: 'Start, inclusive (RFC 3339 or YYYY-MM-DD, UTC). Default: the start of the current UTC month.' })),
              to: Type.Optional(Type.String({ maxLength: 40, description: 'End, exclusive. Default: now.' })),
              bucket: Type.Optional(StringEnum(['hour', 'day', 'month'] as const, { default: 'day' })),
              group_by: Type.Optional(
                Type.String({ maxLength: 300, description: 'Comma-separated, up to 4 of: model, key_id, instance_id, sku, pool, kind, label:<name>.' }),
              ),
              limit: Type.Optional(Type.Integer({ minimum: 1, maximum: PAGE_MAX, default: 100 })),
              after: Type.Optional(
                Type.String({
                  maxLength: 4096,
                  pattern: '^[A-Za-z0-9_-]+$',
                  description: 'next_cursor of the previous page. It keeps that page\'s range (its end fixed when to was left out), bucket and group_by; give the same or leave them out.',
                }),
              ),
            },
            { additionalProperties: false },
          ),
          response: {
            ...responses({}),
            200: {
              description: 'The buckets as JSON, one page at a time; with Accept: text/csv, every bucket of the range as one CSV download.',
              content: {
                'application/json': {
                  schema: Type.Object({
                    object: Type.Literal('list'),
                    from: Type.String({ format: 'date-time' }),
                    to: Type.String({ format: 'date-time' }),
                    bucket: StringEnum(['hour', 'day', 'month'] as const),
                    group_by: Type.Array(Type.String()),
                    data: Type.Array(Type.Ref(UsageBucket)),
                    totals: Type.Object(QuantityFields, { description: 'Sums over every bucket of the range, not just this page.' }),
                    has_more: Type.Boolean(),
                    next_cursor: Type.Union([Type.String(), Type.Null()]),
                  }),
                },
                'text/csv': {
                  schema: Type.String({
                    description:
                      'RFC 4180, CRLF line ends, sent as an attachment (content-disposition). Header row: start, end, one column per group_by dimension, ' +
                      'amount_usd (exact, nine decimal places), input_tokens, output_tokens, gpu_seconds, requests. A cell starting with =, +, - or @ is ' +
                      "prefixed with ' so a spreadsheet does not run it. At most 100,000 rows; no paging (limit and after are ignored).",
                  }),
                },
              },
            },
          },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const now = deps.now();
        const cursor = q.after === undefined ? null : decodeUsageCursor(q.after);
        if (q.after !== undefined && !cursor) throw new ApiError('invalid_request', 'after must be the next_cursor of a previous page', { param: 'after' });
        const from = q.from !== undefined ? parseTimeParam(q.from, 'from') : (cursor?.from ?? billingPeriod(now).start);
        // A later page keeps the range of the first: the end it had, not a later now.
        const to = q.to !== undefined ? parseTimeParam(q.to, 'to') : (cursor?.to ?? now);
        if (to <= from) throw new ApiError('invalid_request', 'to must be after from', { param: 'to' });
        const bucket = q.bucket ?? cursor?.bucket ?? 'day';
        if ((to - from) / 3_600_000 > MAX_HOURS[bucket]) {
          throw new ApiError('invalid_request', `a range of ${bucket} buckets may span at most ${MAX_HOURS[bucket] / 24} days; use a larger bucket or a shorter range`, { param: 'to' });
        }
        // A cursor's dimensions are checked as a group_by is: it comes back from the client.
        const groupBy = q.group_by ?? (cursor && cursor.dimensions.length > 0 ? cursor.dimensions.join(',') : undefined);
        const parsed = parseDimensions(groupBy === undefined ? [] : [groupBy]);
        if ('error' in parsed) throw new ApiError('invalid_request', parsed.error, { param: 'group_by' });
        const { dimensions } = parsed;
        const query = { from, to, bucket, dimensions };
        if (cursor && !sameQuery(cursor, query)) {
          throw new ApiError('invalid_request', 'after is the cursor of another query: give the from, to, bucket and group_by of the page it came with, or leave them out', { param: 'after' });
        }

        await deps.flushUsage();
        const rows = rollup(await deps.ledger.hourly(request.principal!.org.id, { from, to }, dimensions), dimensions, bucket);

        if (request.headers.accept?.split(',').some((t) => t.trim().startsWith('text/csv'))) {
          if (rows.length > CSV_MAX_ROWS) throw new ApiError('invalid_request', `the export has ${rows.length} rows, more than ${CSV_MAX_ROWS}; use a larger bucket or a shorter range`, { param: 'to' });
          return reply
            .type('text/csv; charset=utf-8')
            .header('content-disposition', `attachment; filename="usage-${new Date(from).toISOString().slice(0, 10)}-${bucket}.csv"`)
            .send(rollupCsv(rows, dimensions));
        }

        const limit = q.limit ?? 100;
        const rest = cursor ? rowsAfter(rows, cursor.last, dimensions) : rows;
        const page = rest.slice(0, limit);
        const hasMore = rest.length > limit;
        const last = page.at(-1);
        return {
          object: 'list' as const,
          from: new Date(from).toISOString(),
          to: new Date(to).toISOString(),
          bucket,
          group_by: dimensions,
          data: page.map((r) => ({ object: 'billing.usage_bucket' as const, start: new Date(r.start).toISOString(), end: new Date(r.end).toISOString(), group: r.group, ...quantities(r) })),
          totals: quantities(totals(rows)),
          has_more: hasMore,
          next_cursor: hasMore && last ? encodeUsageCursor({ ...query, last: { start: last.start, group: last.group } }) : null,
        };
      },
    );

    app.get(
      '/billing/balance',
      {
        config: { scope: 'billing:read' },
        schema: { tags, operationId: 'getBillingBalance', summary: "Your organization's credit balance, month-to-date bill and limits", response: responses({ 200: Type.Ref(Balance) }) },
      },
      async (request) => {
        const orgId = request.principal!.org.id;
        await deps.flushUsage();
        const account = await deps.ledger.account(orgId, billingPeriod(deps.now()).id);
        const balance = account.creditedNanos - account.spentNanos;
        return {
          object: 'billing.balance' as const,
          currency: 'usd' as const,
          mode: account.mode,
          balance: usd(balance),
          balance_nanos: balance,
          credited: usd(account.creditedNanos),
          spent: usd(account.spentNanos),
          month_to_date: usd(account.periodNanos),
          credit_limit: orNull(account.creditLimitNanos),
          low_balance_threshold: orNull(account.lowBalanceNanos),
        };
      },
    );
  };
}

