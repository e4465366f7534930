import { describe, expect, it } from 'vitest';
import { INSTANCE_STATUSES, TERMINAL, decide, isBillable, transition, type Decision, type InstanceStatus, type LifecycleEvent, type Occurrence } from './lifecycle.js';

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

describe('what happens to an instance (decide)', () => {
  const d = (over: Partial<Decision>): Decision => ({ event: null, stop: null, restart: false, progress: false, access: false, kill: false, ...over });
  it.each<[InstanceStatus, Occurrence, Decision]>([
    ['provisioning', { kind: 'report', state: 'pulling' }, d({ event: 'start', progress: true })],
    ['starting', { kind: 'report', state: 'pulling' }, d({ progress: true })],
    ['ready', { kind: 'report', state: 'pulling' }, d({})],
    ['starting', { kind: 'report', state: 'running' }, d({ event: 'running', access: true })],
    ['ready', { kind: 'report', state: 'running' }, d({ access: true })],
    // A draining instance that still runs lost its stop: send it again.
    ['draining', { kind: 'report', state: 'running' }, d({ stop: 'resend' })],
    ['starting', { kind: 'report', state: 'failed' }, d({ event: 'fail' })],
    ['ready', { kind: 'report', state: 'failed' }, d({ event: 'stopped' })],
    ['draining', { kind: 'report', state: 'stopping' }, d({})],
    ['draining', { kind: 'report', state: 'gone' }, d({ event: 'stopped' })],
    ['ready', { kind: 'report', state: 'exited' }, d({ event: 'stopped' })],
    ['provisioning', { kind: 'hello', running: true }, d({ event: 'running', access: true })],
    ['provisioning', { kind: 'hello', running: false }, d({ restart: true })],
    ['ready', { kind: 'hello', running: true }, d({ access: true })],
    ['ready', { kind: 'hello', running: false }, d({ event: 'terminate', stop: 'force' })],
    // The stop is re-sent on every reconnect until the node reports the container gone.
    ['draining', { kind: 'hello', running: true }, d({ stop: 'resend' })],
    ['draining', { kind: 'hello', running: false }, d({ stop: 'resend' })],
    ['ready', { kind: 'terminate', force: false }, d({ event: 'terminate', stop: 'graceful' })],
    ['starting', { kind: 'terminate', force: true }, d({ event: 'terminate', stop: 'force' })],
    // Never ready: nothing to stop gracefully (a grace there was unbilled GPU time), so it is killed.
    ['provisioning', { kind: 'terminate', force: false }, d({ event: 'terminate', stop: 'force' })],
    ['starting', { kind: 'terminate', force: false }, d({ event: 'terminate', stop: 'force' })],
    // A repeated terminate sends the stop again; force escalates.
    ['draining', { kind: 'terminate', force: false }, d({ stop: 'resend' })],
    ['draining', { kind: 'terminate', force: true }, d({ stop: 'force' })],
    ['ready', { kind: 'expire' }, d({ event: 'terminate', stop: 'graceful' })],
    // Ended before it was ever ready: failed (refunded), its pull stopped.
    ['provisioning', { kind: 'expire' }, d({ event: 'fail', kill: true })],
    ['starting', { kind: 'expire' }, d({ event: 'fail', kill: true })],
    // Expiry covers draining.
    ['draining', { kind: 'expire' }, d({ stop: 'resend' })],
    ['starting', { kind: 'node_lost' }, d({ event: 'fail' })],
    ['ready', { kind: 'node_lost' }, d({})],
    ['provisioning', { kind: 'forget' }, d({ event: 'fail' })],
    ['ready', { kind: 'forget' }, d({ event: 'stopped' })],
    ['draining', { kind: 'forget' }, d({ event: 'stopped' })],
    // No live session for the start order: wait for the node's Hello (restart) or its deadline (node_lost).
    ['provisioning', { kind: 'undeliverable' }, d({})],
    ['provisioning', { kind: 'hello', running: false }, d({ restart: true })],
    ['provisioning', { kind: 'node_lost' }, d({ event: 'fail' })],
    // Failed as "node lost before ready", then reported alive by its node: its GPUs went to
    // others, so its container is killed there.
    ['failed', { kind: 'report', state: 'running' }, d({ kill: true })],
    ['failed', { kind: 'report', state: 'pulling' }, d({ kill: true })],
    ['terminated', { kind: 'report', state: 'unhealthy' }, d({ kill: true })],
    ['terminated', { kind: 'hello', running: true }, d({ kill: true })],
    ['failed', { kind: 'report', state: 'stopping' }, d({})],
    ['terminated', { kind: 'report', state: 'gone' }, d({})],
  ])('%s + %j', (status, happened, expected) => {
    expect(decide(status, happened)).toEqual(expected);
  });

  it('does nothing to a terminal instance but kill a container still reported alive', () => {
    const all: Occurrence[] = [
      { kind: 'report', state: 'exited' },
      { kind: 'hello', running: false },
      { kind: 'terminate', force: true },
      { kind: 'expire' },
      { kind: 'forget' },
      { kind: 'node_lost' },
    ];
    for (const status of TERMINAL) for (const happened of all) expect(decide(status, happened)).toEqual(d({}));
  });

  it('only ever decides events the status table allows', () => {
    const kinds: Occurrence[] = [
      ...(['pulling', 'starting', 'running', 'unhealthy', 'restarting', 'stopping', 'exited', 'failed', 'gone'] as const).map((state) => ({ kind: 'report' as const, state })),
      { kind: 'hello', running: true },
      { kind: 'hello', running: false },
      { kind: 'terminate', force: false },
      { kind: 'terminate', force: true },
      { kind: 'expire' },
      { kind: 'node_lost' },
      { kind: 'forget' },
      { kind: 'undeliverable' },
    ];
    for (const status of INSTANCE_STATUSES) {
      for (const happened of kinds) {
        const { event } = decide(status, happened);
        if (event) expect(transition(status, event).ok, `${status} + ${JSON.stringify(happened)} -> ${event}`).toBe(true);
      }
    }
  });
});
