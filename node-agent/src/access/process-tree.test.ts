import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { descendants, parentPidOf, processEnded, stateOf } from './process-tree.js';

describe('process tree', () => {
  it('reads the parent pid even when the command name has spaces and parentheses', () => {
    expect(parentPidOf('4185 (sh) S 4160 4185 4185 0 -1 4194560 ...')).toBe(4160);
    expect(parentPidOf('77 (my (odd) name) R 12 77 77 0')).toBe(12);
    expect(parentPidOf('garbage')).toBeUndefined();
  });

  it('lists a process and its descendants, not its siblings or parent', () => {
    const parents = new Map([
      [1, 0],
      [10, 1],
      [11, 10],
      [12, 11],
      [13, 10],
      [20, 1],
    ]);
    expect(descendants(10, parents)).toEqual([10, 11, 13, 12]);
    expect(descendants(20, parents)).toEqual([20]);
  });
});

describe('processEnded', () => {
  it('reads the state even when the command name has spaces and parentheses', () => {
    expect(stateOf('42 (a (weird) name) Z 1 42 42 0 -1')).toBe('Z');
    expect(stateOf('42 (sleep) S 1 42')).toBe('S');
    expect(stateOf('garbage')).toBeUndefined();
  });

  it('is false for a live process, true for a zombie not yet reaped and for one gone', async () => {
    // sh starts a child, then becomes `sleep`, which never reaps it: once the child exits
    // (after the exec, so that sh cannot reap it first) it is a zombie for as long as the
    // sleep lasts, with /proc/<pid> still there.
    const parent = spawn('sh', ['-c', 'sleep 1 & echo $!; exec sleep 10'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const [line] = (await once(parent.stdout!, 'data')) as [Buffer];
      const zombie = Number(line.toString().trim());
      expect(await processEnded(zombie)).toBe(false);
      await vi.waitFor(() => expect(readFileSync(`/proc/${zombie}/stat`, 'utf8')).toMatch(/\) Z /), { timeout: 5_000 });
      expect(existsSync(`/proc/${zombie}`)).toBe(true);
      expect(await processEnded(zombie)).toBe(true);
      expect(await processEnded(parent.pid!)).toBe(false);
    } finally {
      parent.kill('SIGKILL');
    }
    await once(parent, 'exit');
    await vi.waitFor(async () => expect(await processEnded(parent.pid!)).toBe(true));
  });
});
