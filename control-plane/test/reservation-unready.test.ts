// A reservation that reaches its end before its instance was ever ready (its image still
// pulling) gave its owner nothing: it fails, refunded as any failed provision, and its
// node is told to stop the pull. It had been terminated and kept its whole up-front charge.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { addReadyNode, startControlPlane, type TestControlPlane } from './harness.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import type { Store } from '../src/store/store.js';

describe.each(STORE_ENGINES)('on %s', (engine) => {
  const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
  let cp: TestControlPlane<Store>;
  let key: string;
  const sent: Array<{ kind: string; taskId: string; force?: boolean }> = [];

  beforeAll(async () => {
    cp = await startControlPlane({ clock, engine });
    key = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
    await addReadyNode(cp, { pool: 'eu', gpus: 8 });
    cp.app.services.taskDispatcher.attach((_nodeId, command) => {
      if (command.start_task) sent.push({ kind: 'start', taskId: command.start_task.task_id ?? '' });
      if (command.stop_task) sent.push({ kind: 'stop', taskId: command.stop_task.task_id ?? '', force: command.stop_task.force });
      return true;
    });
  });
  afterAll(() => cp.close());

  it('fails a reservation whose end came before it was ready, refunds it whole, and stops its pull', async () => {
    const res = await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 1, duration_hours: 1 } });
    expect(res.status, res.text).toBe(201);
    const id = res.body.id as string;
    expect(sent).toContainEqual({ kind: 'start', taskId: id });
    clock.advance(3_600_001);
    await cp.app.services.instances.expireDue();
    const after = (await cp.request('GET', `/v1/instances/${id}`, { key })).body;
    expect(after).toMatchObject({ status: 'failed', failure_reason: expect.stringContaining('reservation ended before the instance was ready') });
    expect(sent).toContainEqual({ kind: 'stop', taskId: id, force: true });
    const charges = (await cp.request('GET', '/v1/billing/charges?limit=100', { key })).body.data.filter((c: { instance_id: string }) => c.instance_id === id);
    expect(charges.map((c: { kind: string }) => c.kind).sort()).toEqual(['refund', 'reservation']);
    expect(charges.reduce((sum: number, c: { amount: number }) => sum + c.amount, 0)).toBeCloseTo(0, 9);
  });
});
