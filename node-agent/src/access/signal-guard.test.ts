import { describe, expect, it } from 'vitest';
import { checkPid, signalVerdict, type PidFacts } from './signal-guard.js';

const container = 'pid:[4026532500]';
const host = 'pid:[4026531836]';
const base: PidFacts = { pid: 4321, agentPid: 77, pidNamespace: container, containerNamespace: container, agentNamespace: host };

describe('which pids a tenant\'s signal may reach', () => {
  it.each([
    ['a process of the container', {}, true],
    ['pid 0 (an exec not started yet: kill(0) is the agent\'s process group)', { pid: 0 }, false],
    ['pid -1 (every process the agent may signal)', { pid: -1 }, false],
    ['pid 1 (the host\'s init)', { pid: 1 }, false],
    ['a negative pid (a process group)', { pid: -4321 }, false],
    ['a fraction', { pid: 12.5 }, false],
    ['NaN', { pid: Number.NaN }, false],
    ['the agent itself', { pid: 77, pidNamespace: host }, false],
    ['a host process (reused pid)', { pidNamespace: host }, false],
    ['another container\'s process', { pidNamespace: 'pid:[4026532999]' }, false],
    ['a process that is gone', { pidNamespace: undefined }, false],
    ['a container that is not running', { containerNamespace: undefined }, false],
    ['a container in the host\'s PID namespace', { containerNamespace: host, pidNamespace: host }, false],
  ] as const)('%s', (_what, change, send) => {
    const verdict = signalVerdict({ ...base, ...change });
    expect(verdict.send).toBe(send);
    if (!verdict.send) expect(verdict.reason).toMatch(/\w/);
  });

  it('refuses the agent and pid 0 when read from the real /proc', async () => {
    // The agent's own namespace is the host's here: nothing in it is a container's.
    expect((await checkPid(process.pid, process.pid)).send).toBe(false);
    expect((await checkPid(0, process.pid)).send).toBe(false);
    expect((await checkPid(process.pid, undefined)).send).toBe(false);
  });
});
