// A billing month end to end, on an injectable clock: instances run, inference is served,
// GET /v1/instances/{id} shows each instance's availability so far (a provider-caused
// outage of its node or GPU counts against it, a tenant's own terminate does not); once
// the month has ended the control plane by itself issues the SLA credit (once) and
// finalizes the month's invoice (numbered, immutable), whose PDF is rendered to PNG with
// pdftoppm and left in test-output/ for a person to look at.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { OperatorKeyService } from '../src/operators/operator-key-service.js';
import { addReadyNode, startControlPlane, type TestControlPlane } from './harness.js';

const H = 3_600_000;
const clock = new ManualClock(Date.UTC(2026, 10, 1));
let cp: TestControlPlane;
let key: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock, config: { slaCreditCheckMs: 50 } });
  key = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
  // Start orders are taken as delivered: this suite plays the agents' reports itself.
  cp.app.services.taskDispatcher.attach(() => true);
});
afterAll(() => cp.close());

/** Each on a node of its own (one pool each), so one's faults are not another's. */
async function readyInstance(pool: 'na' | 'eu' | 'apac', body: Record<string, unknown>): Promise<{ id: string; nodeId: string; gpu: string }> {
  await addReadyNode(cp, { gpus: 8, pool });
  const created = await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 1, pool, ...body } });
  expect(created.status).toBe(201);
  const record = (await cp.store.instances.get(created.body.id))!;
  await cp.app.services.instances.onTaskState(record.nodeId!, record.id, 'running', {});
  return { id: record.id, nodeId: record.nodeId!, gpu: record.gpuUuids[0]! };
}

const health = (nodeId: string, kind: 'node_down' | 'node_up' | 'xid' | 'recovered', gpuUuid: string | null = null, healthy: boolean | null = null) =>
  cp.store.nodes.recordHealthEvent({ nodeId, gpuUuid, gpuIndex: gpuUuid ? 0 : null, kind, xid: kind === 'xid' ? 79 : null, healthy, message: kind, at: clock.now() });

describe('a billing month', () => {
  it('measures the month, credits a miss after it ends, once, and shows it in the balance and rollup', async () => {
    const reserved = await readyInstance('eu', { duration_hours: 168 });
    const onDemand = await readyInstance('na', {});
    const healthy = await readyInstance('apac', {});

    await cp.store.usage.append([{ id: 'usage_nov', orgId: cp.org.id, keyId: 'k', requestId: 'req_nov', kind: 'chat', model: 'llama-3.1-8b-instruct', quantization: 'fp16', pool: 'eu', promptTokens: 1_000, completionTokens: 500, costNanos: 123_456_789, user: null, sandbox: false, createdAt: clock.now() }]);
    clock.advance(100 * H);
    // A 3 h outage of the reserved instance's node (99.9% target: a miss).
    await health(reserved.nodeId, 'node_down');
    clock.advance(3 * H);
    await health(reserved.nodeId, 'node_up');
    // A 20 min XID fault on the on-demand instance's GPU (99.5% target over ~120 h: met... barely).
    await health(onDemand.nodeId, 'xid', onDemand.gpu, false);
    clock.advance(20 * 60_000);
    await health(onDemand.nodeId, 'recovered', onDemand.gpu, true);
    clock.advance(16 * H + 40 * 60_000);

    const r = (await cp.request('GET', `/v1/instances/${reserved.id}`, { key })).body.sla;
    expect(r).toEqual({ period: '2026-11', availability_percent: expect.closeTo(100 * (1 - 3 / 120), 3), target_percent: 99.9, met: false, downtime_seconds: 3 * 3600 });
    const o = (await cp.request('GET', `/v1/instances/${onDemand.id}`, { key })).body.sla;
    expect(o).toMatchObject({ target_percent: 99.5, met: true, downtime_seconds: 1200 });
    // Another instance's faults are not this one's.
    expect((await cp.request('GET', `/v1/instances/${healthy.id}`, { key })).body.sla).toMatchObject({ availability_percent: 100, met: true, downtime_seconds: 0 });

    // The tenant ends the on-demand instance; the month ends; the issuer runs by itself.
    await cp.request('POST', `/v1/instances/${onDemand.id}/terminate`, { key, body: { force: true } });
    await cp.app.services.instances.onTaskState(onDemand.nodeId, onDemand.id, 'exited', {});
    clock.set(Date.UTC(2026, 11, 1, 0, 5));
    const credits = await eventually(async () => {
      const rows = (await cp.request('GET', '/v1/billing/usage?from=2026-12-01&to=2026-12-02&bucket=day&group_by=kind,instance_id', { key })).body.data;
      const sla = rows.filter((row: any) => row.group.kind === 'sla_credit');
      return sla.length > 0 ? sla : undefined;
    });
    expect(credits.map((c: any) => c.group.instance_id)).toEqual([reserved.id]);
    // 3 h down of its 168 reserved hours (98.2%): under 99%, so 30% of those hours' value at its booked rate.
    const rate = (await cp.store.instances.get(reserved.id))!.rateMicros;
    const expected = Math.round(rate * 1_000 * 168 * 0.3);
    expect(credits[0].amount_nanos).toBe(-expected);

    // Issued once, however often the issuer runs (another replica, a restart).
    expect(await cp.app.services.sla.issueCredits({ id: '2026-11', start: Date.UTC(2026, 10, 1), end: Date.UTC(2026, 11, 1) })).toBe(0);
    const balance = (await cp.request('GET', '/v1/billing/balance', { key })).body;
    expect(balance.credited).toBeCloseTo(expected / 1e9, 6);

    // November's invoice was finalized by itself: numbered, its lines as a customer reads them.
    const invoices = (await cp.request('GET', '/v1/billing/invoices', { key })).body.data;
    expect(invoices.map((i: any) => [i.id === 'upcoming' ? 'upcoming' : 'final', i.period, i.status])).toEqual([
      ['upcoming', '2026-12', 'draft'],
      ['final', '2026-11', 'final'],
    ]);
    const november = (await cp.request('GET', `/v1/billing/invoices/${invoices[1].id}`, { key })).body;
    expect(november.number).toMatch(/^INV-202611-\d{6}$/);
    expect(november.lines.map((l: any) => [l.section, l.description])).toEqual([
      ['compute', 'h100-80gb on-demand'],
      ['compute', 'h100-80gb reservations'],
      ['inference', 'llama-3.1-8b-instruct'],
    ]);
    // The invoice equals the ledger of its month, to the nano-dollar.
    const ledgerMonth = (await cp.request('GET', '/v1/billing/usage?from=2026-11-01&to=2026-12-01&bucket=month', { key })).body.totals.amount_nanos;
    expect(november.total_nanos).toBe(ledgerMonth);
    expect(november.amount_due).toBe(Math.floor((ledgerMonth + 5_000_000) / 10_000_000) / 100);
    // The SLA credit, issued in December, is on December's bill.
    const upcoming = (await cp.request('GET', '/v1/billing/invoices/upcoming', { key })).body;
    expect(upcoming.lines.filter((l: any) => l.section === 'credits').map((l: any) => l.amount_nanos)).toEqual([-expected]);

    // Finalized means final: a late usage record dated in November changes the ledger, not the invoice.
    await cp.store.usage.append([{ id: 'usage_late', orgId: cp.org.id, keyId: 'k', requestId: 'r', kind: 'chat', model: 'llama-3.1-8b-instruct', quantization: 'fp16', pool: 'eu', promptTokens: 1, completionTokens: 1, costNanos: 7, user: null, sandbox: false, createdAt: Date.UTC(2026, 10, 30) }]);
    expect((await cp.request('GET', `/v1/billing/invoices/${invoices[1].id}`, { key })).body).toEqual(november);
    expect(() => cp.store.db.prepare("UPDATE invoices SET total_nanos = 0").run()).toThrow(/cannot change/);

    // The PDF, rendered to an image a person can check.
    const pdf = await fetch(`${cp.baseUrl}/v1/billing/invoices/${invoices[1].id}/pdf`, { headers: { authorization: `Bearer ${key}` } });
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get('content-type')).toBe('application/pdf');
    const bytes = Buffer.from(await pdf.arrayBuffer());
    expect(bytes.subarray(0, 5).toString()).toBe('%PDF-');
    const out = fileURLToPath(new URL('../../test-output', import.meta.url));
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, 'invoice-2026-11.pdf'), bytes);
    execFileSync('pdftoppm', ['-png', '-r', '80', '-singlefile', join(out, 'invoice-2026-11.pdf'), join(out, 'invoice-2026-11')], { timeout: 60_000 });
    const text = execFileSync('pdftotext', ['-layout', join(out, 'invoice-2026-11.pdf'), '-'], { timeout: 60_000 }).toString();
    expect(text).toContain(november.number);
    expect(text).toContain('h100-80gb reservations');
    expect(text).toMatch(/Amount due\s+\$[\d,]+\.\d{2}/);
    expect(statSync(join(out, 'invoice-2026-11.png')).size).toBeGreaterThan(10_000);
    console.log(`invoice PDF and its rendering: ${join(out, 'invoice-2026-11.pdf')}, ${join(out, 'invoice-2026-11.png')}`);
  });
});

describe('an instance the provider ends', () => {
  it("counts a reservation an operator terminated as down until it would have expired; the tenant's own terminate does not", async () => {
    clock.set(Date.UTC(2026, 11, 10));
    const operatorKey = (await new OperatorKeyService(cp.store.operators, cp.clock).create({ scopes: ['operator:write'], name: 'on-call', createdBy: 'local' })).value;
    const byOperator = await readyInstance('eu', { duration_hours: 24 });
    const byTenant = await readyInstance('apac', { duration_hours: 24 });
    clock.advance(2 * H);
    const ended = await cp.request('POST', `/ops/v1/instances/${byOperator.id}/terminate`, { key: operatorKey, body: { force: true } });
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    await cp.request('POST', `/v1/instances/${byTenant.id}/terminate`, { key, body: { force: true } });
    for (const i of [byOperator, byTenant]) await cp.app.services.instances.onTaskState(i.nodeId, i.id, 'exited', {});
    // Down so far: the hour since the operator's terminate.
    clock.advance(H);
    expect((await cp.request('GET', `/v1/instances/${byOperator.id}`, { key })).body.sla).toMatchObject({ met: false, downtime_seconds: 3600 });
    clock.advance(23 * H);

    // Past its expiry: 2 h served of the 24 reserved, the other 22 h are the provider's.
    expect((await cp.request('GET', `/v1/instances/${byOperator.id}`, { key })).body.sla).toMatchObject({ met: false, downtime_seconds: 22 * 3600 });
    expect((await cp.request('GET', `/v1/instances/${byTenant.id}`, { key })).body.sla).toMatchObject({ met: true, downtime_seconds: 0 });
  });
});

async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}
