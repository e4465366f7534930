// The ledger and its rollups, on both store engines (a SQLite file and a real PostgreSQL
// server: the proof that the two ledgers are one): for random months of compute
// charges (on-demand, reservations, extensions, refunds), inference usage (live and
// sandbox) and credits, every grouping and bucket of the rollup sums to the ledger to the
// nano-dollar, the store's SQL hour rows equal the reference computed line by line, the
// account's running totals equal the lines, and every month finalized through the
// invoice service (at month end, on an injected clock) invoices exactly that month's
// lines: the invoices of all the months add up to the ledger.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { STORE_ENGINES, storeFixture, type StoreEngine, type StoreFixture } from '../../../test/support/postgres-stores.js';
import type { Store } from '../store/store.js';
import type { SqliteStore } from '../store/sqlite/sqlite-store.js';
import type { PostgresStore } from '../store/postgres/postgres-store.js';
import { draftInvoice, invoiceNumber, nanosToCents } from './invoice.js';
import { InvoiceService } from './invoice-service.js';
import { billingPeriod } from './periods.js';
import {
  bucketEnd,
  bucketStart,
  hourRows,
  nanosToUsdString,
  parseDimensions,
  rollup,
  rollupCsv,
  totals,
  type Bucket,
  type Dimension,
  type LedgerLine,
} from './ledger.js';

const OCT = Date.UTC(2026, 9, 1);
const NOV = Date.UTC(2026, 10, 1);
const DEC = Date.UTC(2026, 11, 1);
const JAN = Date.UTC(2027, 0, 1);

describe('buckets', () => {
  it.each([
    [Date.UTC(2026, 10, 24, 13, 59, 59, 999), 'hour', Date.UTC(2026, 10, 24, 13), Date.UTC(2026, 10, 24, 14)],
    [Date.UTC(2026, 10, 30, 23, 30), 'day', Date.UTC(2026, 10, 30), DEC],
    [Date.UTC(2026, 11, 31, 23, 59), 'month', DEC, JAN],
    [Date.UTC(2028, 1, 29, 12), 'month', Date.UTC(2028, 1, 1), Date.UTC(2028, 2, 1)],
  ] as const)('%d in a %s bucket', (ms, bucket, start, end) => {
    expect(bucketStart(ms, bucket)).toBe(start);
    expect(bucketEnd(start, bucket)).toBe(end);
  });
});

describe('parseDimensions', () => {
  it('accepts the documented dimensions, comma-separated or repeated, once each', () => {
    expect(parseDimensions(['model,kind', 'label:team', 'model'])).toEqual({ dimensions: ['model', 'kind', 'label:team'] });
  });
  it.each([['region'], ['label:'], ['label:a b'], ['label:x"y'], ['model,sku,pool,kind,key_id']])('refuses %s', (value) => {
    expect(parseDimensions([value])).toHaveProperty('error');
  });
});

describe('money as text', () => {
  it.each([
    [0, '0.000000000'],
    [1, '0.000000001'],
    [1_500_000_000, '1.500000000'],
    [-2_000_000_001, '-2.000000001'],
  ])('%d nanos is %s USD', (nanos, text) => expect(nanosToUsdString(nanos)).toBe(text));

  it('writes CSV a spreadsheet cannot run: quotes, and formulas defused', () => {
    const csv = rollupCsv(
      [{ start: NOV, end: DEC, group: { 'label:team': '=HYPERLINK("x")' }, amountNanos: 5, inputTokens: 1, outputTokens: 2, gpuSeconds: 0, requests: 1, lines: 1 }],
      ['label:team'],
    );
    expect(csv).toBe(
      'start,end,label:team,amount_usd,input_tokens,output_tokens,gpu_seconds,requests\r\n' +
        `2026-11-01T00:00:00.000Z,2026-12-01T00:00:00.000Z,"'=HYPERLINK(""x"")",0.000000005,1,2,0,1\r\n`,
    );
  });

  it.each([
    ['=1+1', "'=1+1"],
    ['+1', "'+1"],
    ['@SUM(A1)', "'@SUM(A1)"],
    ["-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"],
    ['-1e3', "'-1e3"],
    ['\tx', "'\tx"],
    ['-41.832', '-41.832'],
    ['-7', '-7'],
    ['team-a', 'team-a'],
  ])('a label value %j is written %j', (value, written) => {
    const csv = rollupCsv([{ start: NOV, end: DEC, group: { 'label:team': value }, amountNanos: -5, inputTokens: 0, outputTokens: 0, gpuSeconds: 0, requests: 0, lines: 1 }], ['label:team']);
    expect(csv.split('\r\n')[1]).toBe(`2026-11-01T00:00:00.000Z,2026-12-01T00:00:00.000Z,${written},-0.000000005,0,0,0,0`);
  });
});

// ------------------------------------------------------------ property: ledger = rollups

const SKUS = ['h100-80gb', 'a100-40gb'];
const MODELS = ['llama-3.1-8b-instruct', 'qwen2.5-7b-instruct', 'bge-m3'];
const TEAMS = ['ml', 'web', undefined];

type Fact =
  | { type: 'instance'; at: number; sku: number; gpus: number; mode: 'on_demand' | 'reserved'; hours: number; seconds: number; team: number; refund: boolean; extend: number }
  | { type: 'inference'; at: number; model: number; key: number; prompt: number; completion: number; sandbox: boolean }
  | { type: 'credit'; at: number; kind: 'grant' | 'sla_credit'; amount: number };

const at = fc.integer({ min: NOV - 86_400_000, max: JAN + 86_400_000 });
const fact: fc.Arbitrary<Fact> = fc.oneof(
  fc.record({
    type: fc.constant('instance' as const),
    at,
    sku: fc.nat(SKUS.length - 1),
    gpus: fc.constantFrom(1, 2, 4, 8),
    mode: fc.constantFrom('on_demand' as const, 'reserved' as const),
    hours: fc.integer({ min: 1, max: 168 }),
    seconds: fc.integer({ min: 0, max: 400_000 }),
    team: fc.nat(TEAMS.length - 1),
    refund: fc.boolean(),
    extend: fc.integer({ min: 0, max: 48 }),
  }),
  fc.record({
    type: fc.constant('inference' as const),
    at,
    model: fc.nat(MODELS.length - 1),
    key: fc.nat(2),
    prompt: fc.integer({ min: 0, max: 100_000 }),
    completion: fc.integer({ min: 0, max: 10_000 }),
    sandbox: fc.boolean(),
  }),
  fc.record({ type: fc.constant('credit' as const), at, kind: fc.constantFrom('grant' as const, 'sla_credit' as const), amount: fc.integer({ min: 1, max: 50_000_000_000 }) }),
);

let fx: StoreFixture;
let store: Store;
let orgSeq = 0;
/** Each org's lines as the first engine wrote them: the second must read the same, line for line. */
const firstEngineLines = new Map<string, LedgerLine[]>();

/** Runs one statement written with `?` placeholders on either engine, as the services' own writes would land. */
async function exec(sql: string, params: unknown[] = []): Promise<void> {
  if (fx.engine === 'sqlite') {
    (store as SqliteStore).db.prepare(sql).run(...params);
    return;
  }
  let n = 0;
  await (store as PostgresStore).pool.query(sql.replace(/\?/g, () => `$${++n}`), params);
}

async function createOrg(orgId: string): Promise<void> {
  await exec("INSERT INTO orgs (id, name, tier, created_at) VALUES (?, ?, 2, 0)", [orgId, orgId]);
}

/** Writes the facts as the services would: charges with their instance, usage records, credits. */
async function record(orgId: string, facts: readonly Fact[]): Promise<void> {
  const insertInstance = (...params: unknown[]) =>
    exec(
      `INSERT INTO instances (id, org_id, key_id, status, sku, gpus, pool, mode, duration_hours, image, ssh_keys, labels, gpu_uuids, rate_micros, created_at, updated_at)
       VALUES (?, ?, 'key_a', 'terminated', ?, ?, 'us', ?, ?, 'img', '[]', ?, '[]', ?, ?, ?)`,
      params,
    );
  const insertCharge = (...params: unknown[]) => exec('INSERT INTO charges (id, org_id, instance_id, kind, amount_micros, description, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)', params);
  let n = 0;
  for (const f of facts) {
    const id = `${orgId}_${n++}`;
    if (f.type === 'instance') {
      const rate = [2_990_000, 1_290_000][f.sku]!;
      const team = TEAMS[f.team];
      await insertInstance(id, orgId, SKUS[f.sku], f.gpus, f.mode, f.mode === 'reserved' ? f.hours : null, JSON.stringify(team ? { team } : {}), rate, f.at, f.at);
      const amount = f.mode === 'reserved' ? rate * f.gpus * f.hours : Math.round((rate * f.gpus * Math.max(60, f.seconds)) / 3600);
      await insertCharge(`ch_${id}`, orgId, id, f.mode === 'reserved' ? 'reservation' : 'on_demand', amount, 'compute', f.at);
      if (f.mode === 'reserved' && f.extend > 0) await insertCharge(`ex_${id}`, orgId, id, 'extension', rate * f.gpus * f.extend, 'extension', f.at + 1);
      if (f.refund) await insertCharge(`rf_${id}`, orgId, id, 'refund', -amount, 'refund', f.at + 2);
    } else if (f.type === 'inference') {
      await store.usage.append([
        {
          id: `u_${id}`,
          orgId,
          keyId: `key_${f.key}`,
          requestId: `req_${id}`,
          kind: f.model === 2 ? 'embeddings' : 'chat',
          model: MODELS[f.model]!,
          quantization: 'fp16',
          pool: 'us',
          promptTokens: f.prompt,
          completionTokens: f.model === 2 ? 0 : f.completion,
          costNanos: f.sandbox ? 0 : f.prompt * 30 + f.completion * 60,
          user: null,
          sandbox: f.sandbox,
          createdAt: f.at,
        },
      ]);
    } else {
      await store.ledger.addCredit({ id: `cr_${id}`, orgId, kind: f.kind, amountNanos: f.amount, instanceId: null, period: f.kind === 'sla_credit' ? `p${id}` : null, description: 'credit', createdBy: null, createdAt: f.at });
    }
  }
}

async function allLines(orgId: string, from: number, to: number): Promise<LedgerLine[]> {
  const out: LedgerLine[] = [];
  for (;;) {
    const last = out.at(-1);
    const page = await store.ledger.lines(orgId, { from, to }, { limit: 50, ...(last ? { after: { createdAt: last.createdAt, id: last.id } } : {}) });
    out.push(...page);
    if (page.length < 50) return out;
  }
}

const everything = { from: 0, to: 8_640_000_000_000_000 };

describe('invoice arithmetic', () => {
  it.each([
    [0, 0],
    [4_999_999, 0],
    [5_000_000, 1],
    [1_234_567_890, 123],
    [-5_000_000, -1],
  ])('%d nanos is %d cents, half up', (nanos, cents) => expect(nanosToCents(nanos)).toBe(cents));
  it('numbers invoices by month and sequence', () => expect(invoiceNumber('2026-11', 42)).toBe('INV-202611-000042'));
});

describe.each(STORE_ENGINES)('ledger and rollups on %s', (engine: StoreEngine) => {
  beforeAll(async () => {
    fx = await storeFixture(engine);
    store = await fx.open();
    // The same seed draws the same months for the same org ids on each engine.
    orgSeq = 0;
  });
  afterAll(async () => {
    await fx?.close();
  });

  it('agree to the nano-dollar in every grouping and bucket, with the running balance and with every finalized invoice', async () => {
    let finalizedInvoices = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fact, { minLength: 1, maxLength: 40 }),
        fc.subarray<Dimension>(['model', 'key_id', 'instance_id', 'sku', 'pool', 'kind', 'label:team'], { maxLength: 3 }),
        fc.constantFrom<Bucket>('hour', 'day', 'month'),
        async (facts, dimensions, bucket) => {
          // Each run on an empty database: month end finalizes every org with lines, and
          // invoice numbers start again from 1.
          await fx.reset();
          store = await fx.open();
          const orgId = `org_${orgSeq++}`;
          await createOrg(orgId);
          await record(orgId, facts);

          const lines = await allLines(orgId, everything.from, everything.to);
          const first = firstEngineLines.get(orgId);
          if (first) expect(lines).toEqual(first);
          else firstEngineLines.set(orgId, lines);
          const ledgerTotal = lines.reduce((sum, l) => sum + l.amountNanos, 0);
          const account = await store.ledger.account(orgId, '2026-11');
          expect(account.spentNanos - account.creditedNanos).toBe(ledgerTotal);

          // The store's SQL sums equal the reference, hour by hour and group by group.
          const sqlRows = await store.ledger.hourly(orgId, everything, dimensions);
          const reference = hourRows(lines, dimensions);
          expect(rollup(sqlRows, dimensions, bucket)).toEqual(rollup(reference, dimensions, bucket));
          expect(totals(rollup(sqlRows, dimensions, bucket)).amountNanos).toBe(ledgerTotal);

          // A month's rollup is exactly the lines of that month.
          const november = { from: NOV, to: DEC };
          const novLines = lines.filter((l) => l.createdAt >= NOV && l.createdAt < DEC);
          const novRollup = rollup(await store.ledger.hourly(orgId, november, dimensions), dimensions, bucket);
          expect(totals(novRollup)).toMatchObject({
            amountNanos: novLines.reduce((s, l) => s + l.amountNanos, 0),
            inputTokens: novLines.reduce((s, l) => s + l.inputTokens, 0),
            gpuSeconds: novLines.reduce((s, l) => s + l.gpuSeconds, 0),
            lines: novLines.length,
          });
          for (const row of novRollup) expect(row.start).toBeGreaterThanOrEqual(NOV);
          // The running month total kept by the store equals the month's lines.
          expect(account.periodNanos).toBe(totals(novRollup).amountNanos);
          // And the month's invoice, drafted from the store, equals them too.
          const invoiceRows = rollup(await store.ledger.hourly(orgId, november, ['kind', 'sku', 'model']), ['kind', 'sku', 'model'], 'month');
          const invoice = draftInvoice(orgId, { id: '2026-11', start: NOV, end: DEC }, invoiceRows, await store.ledger.credits(orgId, november));
          expect(invoice.totalNanos).toBe(totals(novRollup).amountNanos);
          expect(invoice.items.reduce((sum, item) => sum + item.amountNanos, 0)).toBe(invoice.totalNanos);

          // Month end, as the leader runs it: every month the facts touch (they fall from the
          // last day of October to the first of January) is finalized after it ends.
          const clock = new ManualClock();
          const invoices = new InvoiceService(store.ledger, clock);
          let invoiced = 0;
          let sequence = 0;
          let carried = 0;
          let due = 0;
          for (const period of [OCT, NOV, DEC, JAN].map(billingPeriod)) {
            clock.set(period.end + 10_000);
            const finalized = await invoices.finalize(period);
            const monthLines = lines.filter((l) => l.createdAt >= period.start && l.createdAt < period.end);
            if (monthLines.length === 0) {
              expect(finalized).toEqual([]);
              continue;
            }
            expect(finalized.map((f) => [f.orgId, f.period])).toEqual([[orgId, period.id]]);
            const final = finalized[0]!;
            expect(final).toMatchObject({ number: invoiceNumber(period.id, ++sequence), finalizedAt: clock.now(), periodStart: period.start, periodEnd: period.end });
            // The month's ledger, to the nano-dollar; the lines sum to the total, by section too.
            expect(final.totalNanos).toBe(monthLines.reduce((sum, l) => sum + l.amountNanos, 0));
            expect(final.items.reduce((sum, item) => sum + item.amountNanos, 0)).toBe(final.totalNanos);
            expect(final.subtotalNanos + final.creditsNanos).toBe(final.totalNanos);
            expect(final.items.filter((i) => i.section !== 'credits').reduce((sum, i) => sum + i.amountNanos, 0)).toBe(final.subtotalNanos);
            expect(final.items.filter((i) => i.section === 'credits').reduce((sum, i) => sum + i.amountNanos, 0)).toBe(final.creditsNanos);
            // Credit left by earlier months (their totals below zero) is used first; the rest goes on.
            const applied = Math.min(carried, Math.max(0, final.totalNanos));
            expect(final.creditAppliedNanos).toBe(applied);
            expect(final.amountDueCents).toBe(Math.max(0, nanosToCents(final.totalNanos - applied)));
            carried = Math.max(0, carried - final.totalNanos);
            expect(final.creditCarriedForwardNanos).toBe(carried);
            due += Math.max(0, final.totalNanos - applied);
            // Stored as returned, and never finalized twice.
            expect(await store.ledger.getInvoice(orgId, final.id)).toEqual(final);
            expect(await invoices.finalize(period)).toEqual([]);
            invoiced += final.totalNanos;
          }
          expect((await store.ledger.listInvoices(orgId)).length).toBe(sequence);
          expect(invoiced).toBe(ledgerTotal);
          // What every invoice asked, before rounding, is the ledger plus the credit still carried.
          expect(due).toBe(ledgerTotal + carried);
          finalizedInvoices += sequence;
        },
      ),
      { numRuns: 60, seed: 20261124 },
    );
    // Not vacuous: the runs finalize more than one invoice each on average (111 with this seed).
    expect(finalizedInvoices).toBeGreaterThan(60);
    // The tests below start on an empty database, as the first run did.
    await fx.reset();
    store = await fx.open();
  });

  it('leaves sandbox usage out and carries GPU-seconds exactly', async () => {
    const orgId = 'org_exact';
    await createOrg(orgId);
    await record(orgId, [
      { type: 'instance', at: NOV, sku: 0, gpus: 2, mode: 'on_demand', hours: 1, seconds: 3_661, team: 0, refund: false, extend: 0 },
      { type: 'instance', at: NOV, sku: 1, gpus: 8, mode: 'reserved', hours: 24, seconds: 0, team: 1, refund: false, extend: 2 },
      { type: 'inference', at: NOV, model: 0, key: 0, prompt: 10, completion: 5, sandbox: true },
    ]);
    const rows = rollup(await store.ledger.hourly(orgId, everything, ['kind']), ['kind'], 'month');
    expect(rows.map((r) => [r.group.kind, r.gpuSeconds])).toEqual([
      ['extension', 8 * 2 * 3_600],
      ['on_demand', 2 * 3_661],
      ['reservation', 8 * 24 * 3_600],
    ]);
  });

  it('refuses to change or remove a line or a finalized invoice', async () => {
    await expect(exec("UPDATE charges SET amount_micros = 0 WHERE id = 'ch_org_exact_0'")).rejects.toThrow(/append-only/);
    await expect(exec("DELETE FROM charges WHERE id = 'ch_org_exact_0'")).rejects.toThrow(/append-only/);
    await expect(exec("UPDATE usage_records SET cost_nanos = 0 WHERE id = 'u_org_exact_2'")).rejects.toThrow(/append-only/);
    await expect(exec("DELETE FROM usage_records WHERE id = 'u_org_exact_2'")).rejects.toThrow(/append-only/);
    await store.ledger.addCredit({ id: 'cr_exact', orgId: 'org_exact', kind: 'grant', amountNanos: 1, instanceId: null, period: null, description: 'c', createdBy: null, createdAt: NOV });
    await expect(exec("UPDATE credits SET amount_nanos = 2 WHERE id = 'cr_exact'")).rejects.toThrow(/append-only/);
    await expect(exec("DELETE FROM credits WHERE id = 'cr_exact'")).rejects.toThrow(/append-only/);
    const invoice = draftInvoice('org_exact', { id: '2026-11', start: NOV, end: DEC }, [], []);
    await store.ledger.finalizeInvoice('inv_exact', invoice, (n) => invoiceNumber('2026-11', n), DEC);
    await expect(exec("UPDATE invoices SET total_nanos = 0 WHERE id = 'inv_exact'")).rejects.toThrow(/cannot change/);
    await expect(exec("DELETE FROM invoices WHERE id = 'inv_exact'")).rejects.toThrow(/cannot change/);
    expect(await store.ledger.getInvoice('org_exact', 'inv_exact')).toMatchObject({ number: 'INV-202611-000001', totalNanos: 0 });
    const account = await store.ledger.account('org_exact', '2026-11');
    expect(account.spentNanos - account.creditedNanos).toBe((await allLines('org_exact', everything.from, everything.to)).reduce((sum, l) => sum + l.amountNanos, 0));
  });
});
