import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ALONE } from './fleet-share.js';
import { whileLeading, type Leadership } from './leadership.js';

/** Leadership the test hands out and takes back. */
function scripted(initially: boolean) {
  const events = new EventEmitter<{ change: [boolean] }>();
  let leader = initially;
  const leadership: Leadership = {
    isLeader: () => leader,
    membership: () => ALONE,
    onChange: (listener) => {
      events.on('change', listener);
      return () => events.off('change', listener);
    },
    close: async () => {},
  };
  return {
    leadership,
    set(value: boolean) {
      leader = value;
      events.emit('change', value);
    },
  };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('whileLeading', () => {
  it.each([
    // [case, leader at start, changes, calls]
    ['a leader starts at once', true, [], ['start']],
    ['a follower does nothing', false, [], []],
    ['a follower starts when it wins', false, [true], ['start']],
    ['a leader stops when it loses, and starts again when it wins', true, [false, true], ['start', 'stop', 'start']],
    ['repeated notices change nothing', true, [true, true, false, false], ['start', 'stop']],
  ] as const)('%s', async (_case, initially, changes, calls) => {
    const { leadership, set } = scripted(initially);
    const seen: string[] = [];
    whileLeading(leadership, () => void seen.push('start'), () => void seen.push('stop'));
    for (const change of changes) set(change);
    await settle();
    expect(seen).toEqual(calls);
  });

  it('a loss during a slow start waits for it, then stops', async () => {
    const { leadership, set } = scripted(true);
    const seen: string[] = [];
    let finishStart!: () => void;
    whileLeading(
      leadership,
      () => new Promise<void>((resolve) => (finishStart = () => (seen.push('started'), resolve()))),
      () => void seen.push('stop'),
    );
    await settle();
    set(false);
    await settle();
    expect(seen).toEqual([]);
    finishStart();
    await settle();
    expect(seen).toEqual(['started', 'stop']);
  });

  it('a failing start is reported and later changes still apply; closing stops', async () => {
    const { leadership, set } = scripted(true);
    const seen: string[] = [];
    const stopAll = whileLeading(
      leadership,
      () => {
        throw new Error('boom');
      },
      () => void seen.push('stop'),
      (err) => seen.push(`error: ${(err as Error).message}`),
    );
    await settle();
    set(false);
    set(true);
    await settle();
    await stopAll();
    expect(seen).toEqual(['error: boom', 'stop', 'error: boom', 'stop']);
  });
});
