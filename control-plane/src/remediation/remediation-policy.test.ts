import { describe, expect, it } from 'vitest';
import {
  DEFAULT_KIND_BY_ACTION,
  firstStage,
  nextStep,
  onFault,
  parseActionOverrides,
  type RemediationFacts,
  type RemediationKind,
  type RemediationStage,
  type RemediationStep,
} from './remediation-policy.js';

const facts = (over: Partial<RemediationFacts> = {}): RemediationFacts => ({
  gpuHealthy: false,
  holders: [],
  nodeReady: true,
  nodeCordoned: false,
  command: undefined,
  ...over,
});

describe('remediation policy', () => {
  it('maps each NVIDIA bucket to a kind, and operators can override it', () => {
    expect(DEFAULT_KIND_BY_ACTION).toEqual({
      IGNORE: 'timeline',
      RESTART_APP: 'timeline',
      RESET_GPU: 'reset_gpu',
      RESTART_BM: 'reboot_node',
      CHECK_MECHANICALS: 'drain_gpu',
      CONTACT_SUPPORT: 'drain_gpu',
    });
    expect(parseActionOverrides('')).toEqual(DEFAULT_KIND_BY_ACTION);
    expect(parseActionOverrides(' RESET_GPU=drain_gpu , CONTACT_SUPPORT=timeline')).toMatchObject({ RESET_GPU: 'drain_gpu', CONTACT_SUPPORT: 'timeline', RESTART_BM: 'reboot_node' });
  });

  it.each(['RESET=drain_gpu', 'RESET_GPU=explode', 'RESET_GPU', 'RESET_GPU=drain_gpu=x', 'RESTART_APP=reset_gpu'])('refuses the override %s', (text) => {
    expect(() => parseActionOverrides(text)).toThrow(/SVC_REMEDIATION_ACTIONS/);
  });

  it.each<[RemediationKind, boolean, RemediationStage]>([
    ['reset_gpu', true, 'waiting_idle'],
    ['reset_gpu', false, 'held'],
    ['drain_gpu', true, 'held'],
    ['reboot_node', true, 'node_drained'],
  ])('a %s remediation (auto reset %s) starts %s', (kind, autoReset, stage) => {
    expect(firstStage(kind as Exclude<RemediationKind, 'timeline'>, { autoReset })).toBe(stage);
  });

  it.each<[RemediationKind | undefined, RemediationKind, ReturnType<typeof onFault>]>([
    [undefined, 'timeline', 'none'],
    [undefined, 'reset_gpu', 'open'],
    ['reset_gpu', 'reset_gpu', 'already'],
    ['reset_gpu', 'drain_gpu', 'already'],
    ['reset_gpu', 'reboot_node', 'escalate'],
    ['drain_gpu', 'reset_gpu', 'escalate'],
    ['reboot_node', 'reset_gpu', 'already'],
  ])('open %s + new %s fault: %s', (open, kind, outcome) => {
    expect(onFault(open ? { kind: open } : undefined, kind)).toBe(outcome);
  });

  it.each<[string, RemediationStage, string[], Partial<RemediationFacts>, RemediationStep]>([
    ['an instance holds the GPU: wait, naming it', 'waiting_idle', [], { holders: ['inst_1'] }, { do: 'wait', holders: ['inst_1'] }],
    ['still the same holder: nothing new', 'waiting_idle', ['inst_1'], { holders: ['inst_1'] }, { do: 'nothing' }],
    ['idle, node connected: reset', 'waiting_idle', ['inst_1'], {}, { do: 'reset' }],
    ['idle but the node is away: wait for it', 'waiting_idle', [], { nodeReady: false }, { do: 'nothing' }],
    ['the GPU vanished from the node: wait', 'waiting_idle', [], { gpuHealthy: undefined }, { do: 'nothing' }],
    ['healthy again before the reset: close', 'waiting_idle', [], { gpuHealthy: true }, { do: 'close', outcome: 'recovered', reason: 'the GPU reads healthy again without a reset' }],
    ['reset in flight', 'resetting', [], { command: { state: 'sent', error: null } }, { do: 'nothing' }],
    ['reset done, GPU healthy: back in service', 'resetting', [], { gpuHealthy: true, command: { state: 'succeeded', error: null } }, { do: 'close', outcome: 'returned_to_service', reason: 'the GPU reads healthy after the reset' }],
    ['reset done, health not stored yet: wait', 'resetting', [], { command: { state: 'succeeded', error: null } }, { do: 'nothing' }],
    ['reset failed: hold for an operator', 'resetting', [], { command: { state: 'failed', error: 'busy' } }, { do: 'hold', reason: 'the reset did not bring the GPU back: busy' }],
    ['held until healthy', 'held', [], {}, { do: 'nothing' }],
    ['held, healthy again: close', 'held', [], { gpuHealthy: true }, { do: 'close', outcome: 'recovered', reason: 'the GPU reads healthy again (an operator reset its health or it recovered)' }],
    ['node drained while cordoned', 'node_drained', [], { nodeCordoned: true }, { do: 'nothing' }],
    ['node uncordoned by an operator: close', 'node_drained', [], { nodeCordoned: false }, { do: 'close', outcome: 'node_returned', reason: 'an operator uncordoned the node' }],
    ['closed stays closed', 'closed', [], { gpuHealthy: true }, { do: 'nothing' }],
  ])('%s', (_name, stage, holders, over, step) => {
    expect(nextStep({ kind: 'reset_gpu', stage, holders }, facts(over))).toEqual(step);
  });
});
