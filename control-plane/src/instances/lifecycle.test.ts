import { describe, expect, it } from 'vitest';
import { INSTANCE_STATUSES, TERMINAL, isBillable, transition, type InstanceStatus, type LifecycleEvent } from './lifecycle.js';

describe('instance lifecycle table', () => {
  it.each([
    ['provisioning', 'start', 'starting'],
    ['provisioning', 'running', 'ready'],
    ['provisioning', 'fail', 'failed'],
    ['starting', 'running', 'ready'],
    ['starting', 'fail', 'failed'],
    ['starting', 'terminate', 'draining'],
    ['ready', 'terminate', 'draining'],
    ['ready', 'stopped', 'terminated'],
    ['draining', 'stopped', 'terminated'],
  ] as Array<[InstanceStatus, LifecycleEvent, InstanceStatus]>)('%s + %s -> %s', (from, event, to) => {
    expect(transition(from, event)).toEqual({ ok: true, from, to });
  });

  it.each([
    ['ready', 'fail'], // a running instance is not "failed": that status means no charge
    ['ready', 'start'],
    ['draining', 'running'],
    ['draining', 'terminate'],
  ] as Array<[InstanceStatus, LifecycleEvent]>)('refuses %s + %s', (from, event) => {
    const result = transition(from, event);
    expect(result.ok).toBe(false);
  });

  it('lets nothing leave a terminal status', () => {
    for (const status of TERMINAL) {
      for (const event of ['start', 'running', 'terminate', 'stopped', 'fail'] as LifecycleEvent[]) {
        expect(transition(status, event).ok).toBe(false);
      }
    }
  });

  it('bills only while ready or draining', () => {
    expect(INSTANCE_STATUSES.filter(isBillable)).toEqual(['ready', 'draining']);
  });
});
