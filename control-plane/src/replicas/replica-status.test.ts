import { describe, expect, it } from 'vitest';
import { countsAsRestart, nextReplicaStatus, replicaEventOf } from './replica-status.js';

describe('replica status table', () => {
  it.each([
    ['scheduled', 'agent_starting', 'starting'],
    ['starting', 'agent_running', 'running'],
    ['running', 'agent_unhealthy', 'unhealthy'],
    ['unhealthy', 'agent_running', 'running'],
    ['running', 'agent_restarting', 'restarting'],
    ['restarting', 'agent_starting', 'starting'],
    ['running', 'agent_ended', 'scheduled'],
    ['running', 'stop', 'stopping'],
    ['stopping', 'agent_ended', 'stopped'],
    ['running', 'node_lost', 'lost'],
    ['stopping', 'node_lost', 'lost'],
  ] as const)('%s --%s--> %s', (from, event, to) => {
    expect(nextReplicaStatus(from, event)).toBe(to);
  });

  it('ignores late reports about a replica being stopped, and anything after the end', () => {
    expect(nextReplicaStatus('stopping', 'agent_running')).toBeUndefined();
    expect(nextReplicaStatus('stopped', 'agent_running')).toBeUndefined();
    expect(nextReplicaStatus('lost', 'stop')).toBeUndefined();
  });

  it('maps agent task states to events', () => {
    expect(['pulling', 'starting', 'running', 'unhealthy', 'restarting', 'stopping', 'exited', 'failed', 'gone'].map(replicaEventOf)).toEqual([
      'agent_starting',
      'agent_starting',
      'agent_running',
      'agent_unhealthy',
      'agent_restarting',
      undefined,
      'agent_ended',
      'agent_ended',
      'agent_ended',
    ]);
  });

  it('counts a restart when the agent restarts a live replica or it must be started again', () => {
    expect(countsAsRestart('running', 'agent_restarting')).toBe(true);
    expect(countsAsRestart('running', 'agent_ended')).toBe(true);
    expect(countsAsRestart('stopping', 'agent_ended')).toBe(false);
    expect(countsAsRestart('running', 'agent_unhealthy')).toBe(false);
  });
});
