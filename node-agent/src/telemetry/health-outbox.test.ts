import { describe, expect, it } from 'vitest';
import type { HealthEvent } from '@svc/proto';
import { HealthEventOutbox } from './health-outbox.js';

const event = (n: number): HealthEvent => ({ gpu_uuid: `GPU-${n}`, kind: 'XID', xid: 79, healthy: false });

describe('HealthEventOutbox', () => {
  it('queues while detached and delivers in order on attach, then at once', async () => {
    const outbox = new HealthEventOutbox();
    outbox.push(event(1));
    outbox.push(event(2));
    const sent: string[] = [];
    await outbox.attach(async (e) => void sent.push(e.gpu_uuid!));
    expect(sent).toEqual(['GPU-1', 'GPU-2']);
    outbox.push(event(3));
    await outbox.attach(async (e) => void sent.push(e.gpu_uuid!));
    expect(sent).toEqual(['GPU-1', 'GPU-2', 'GPU-3']);
    expect(outbox.size).toBe(0);
  });

  it('keeps an event whose send failed for the next session', async () => {
    const outbox = new HealthEventOutbox();
    outbox.push(event(1));
    await outbox.attach(() => Promise.reject(new Error('stream ended')));
    outbox.detach();
    expect(outbox.size).toBe(1);
    const sent: string[] = [];
    await outbox.attach(async (e) => void sent.push(e.gpu_uuid!));
    expect(sent).toEqual(['GPU-1']);
  });

  it('drops the oldest past its bound and counts them', () => {
    const outbox = new HealthEventOutbox();
    for (let i = 0; i < 300; i++) outbox.push(event(i));
    expect(outbox.size).toBe(256);
    expect(outbox.dropped).toBe(44);
  });
});
