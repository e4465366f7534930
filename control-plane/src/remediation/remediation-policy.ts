// What the control plane does about a GPU fault, as pure functions over one table.
//
//   fault (XID bucket)              kind          steps
//   IGNORE, RESTART_APP             timeline      nothing: the XID is on the timeline, the GPU keeps working
//   RESET_GPU (48, 95, 64, 119 ...) reset_gpu     drain the GPU from placement, notify the orgs whose
//                                                 instances hold it, wait until nothing holds it, reset it
//                                                 through the agent, return it to service if it reads healthy
//   RESTART_BM (79, 74, 151)        reboot_node   cordon and drain the node, notify every org on the node;
//                                                 an operator reboots it and uncordons it
//   CHECK_MECHANICALS,              drain_gpu     drain the GPU from placement, notify; an operator
//   CONTACT_SUPPORT, unknown XIDs                 clears it (health reset) after fixing or replacing it
//
// Uncorrectable ECC (counter growth or NVML's double-bit event) is reset_gpu like XID 48.
// Operators change the kind per bucket (SVC_REMEDIATION_ACTIONS) and can turn the automatic
// reset off (SVC_REMEDIATION_AUTO_RESET=false: reset_gpu stops at drained, like drain_gpu).
import type { XidAction } from '@svc/shared';

export type RemediationKind = 'timeline' | 'drain_gpu' | 'reset_gpu' | 'reboot_node';

export const REMEDIATION_KINDS: readonly RemediationKind[] = ['timeline', 'drain_gpu', 'reset_gpu', 'reboot_node'];

export const DEFAULT_KIND_BY_ACTION: Readonly<Record<XidAction, RemediationKind>> = {
  IGNORE: 'timeline',
  RESTART_APP: 'timeline',
  RESET_GPU: 'reset_gpu',
  RESTART_BM: 'reboot_node',
  CHECK_MECHANICALS: 'drain_gpu',
  CONTACT_SUPPORT: 'drain_gpu',
};

export interface RemediationPolicy {
  kindByAction: Readonly<Record<XidAction, RemediationKind>>;
  /** Reset idle GPUs through the agent; false leaves reset_gpu faults drained for an operator. */
  autoReset: boolean;
}

const ACTIONS = Object.keys(DEFAULT_KIND_BY_ACTION) as XidAction[];

/**
 * "RESET_GPU=drain_gpu,CONTACT_SUPPORT=reboot_node" -> the policy's table. Throws RangeError
 * naming the bad part, so a typo stops the control plane at start instead of being ignored.
 */
export function parseActionOverrides(text: string): Record<XidAction, RemediationKind> {
  const table = { ...DEFAULT_KIND_BY_ACTION };
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const [action, kind, extra] = part.split('=').map((p) => p.trim());
    if (extra !== undefined || !ACTIONS.includes(action as XidAction)) {
      throw new RangeError(`SVC_REMEDIATION_ACTIONS: "${part}" must be <${ACTIONS.join('|')}>=<kind>`);
    }
    if (!REMEDIATION_KINDS.includes(kind as RemediationKind)) {
      throw new RangeError(`SVC_REMEDIATION_ACTIONS: "${part}": the kind must be one of ${REMEDIATION_KINDS.join(', ')}`);
    }
    // The agent keeps a GPU healthy on these buckets, so nothing would keep it drained.
    if ((action === 'IGNORE' || action === 'RESTART_APP') && kind !== 'timeline') {
      throw new RangeError(`SVC_REMEDIATION_ACTIONS: "${part}": application-level XIDs leave the GPU healthy; only timeline is possible`);
    }
    table[action as XidAction] = kind as RemediationKind;
  }
  return table;
}

/** Where an open remediation stands. `closed` ends it (outcome says how). */
export type RemediationStage = 'waiting_idle' | 'resetting' | 'held' | 'node_drained' | 'closed';

/** Kinds that act on a GPU, strongest last: a stronger fault on a GPU under remediation escalates it. */
const STRENGTH: Record<RemediationKind, number> = { timeline: 0, drain_gpu: 1, reset_gpu: 2, reboot_node: 3 };

/** What a new fault on a GPU does, given the remediation already open there (if any). */
export function onFault(open: { kind: RemediationKind } | undefined, kind: RemediationKind): 'none' | 'open' | 'escalate' | 'already' {
  if (kind === 'timeline') return 'none';
  if (!open) return 'open';
  return STRENGTH[kind] > STRENGTH[open.kind] ? 'escalate' : 'already';
}

/** The first stage of a remediation of this kind. */
export function firstStage(kind: Exclude<RemediationKind, 'timeline'>, policy: Pick<RemediationPolicy, 'autoReset'>): RemediationStage {
  if (kind === 'reboot_node') return 'node_drained';
  if (kind === 'reset_gpu' && policy.autoReset) return 'waiting_idle';
  return 'held';
}

export interface RemediationFacts {
  /** The GPU's health as the store has it; undefined when the node no longer reports the GPU. */
  gpuHealthy: boolean | undefined;
  /** What holds the GPU (instance or replica ids, from its claims). */
  holders: readonly string[];
  /** The node has a live agent session. */
  nodeReady: boolean;
  nodeCordoned: boolean;
  /** The reset command sent for this remediation, if any. */
  command: { state: 'pending' | 'sent' | 'succeeded' | 'failed'; error: string | null } | undefined;
}

export type RemediationStep =
  | { do: 'nothing' }
  /** Record who holds the GPU (only when that changed). */
  | { do: 'wait'; holders: readonly string[] }
  | { do: 'reset' }
  | { do: 'hold'; reason: string }
  | { do: 'close'; outcome: 'returned_to_service' | 'recovered' | 'node_returned'; reason: string };

/** The next step of an open remediation (pure; one row per stage and condition). */
export function nextStep(
  current: { kind: RemediationKind; stage: RemediationStage; holders: readonly string[] },
  facts: RemediationFacts,
): RemediationStep {
  switch (current.stage) {
    case 'waiting_idle':
      if (facts.gpuHealthy === true) return { do: 'close', outcome: 'recovered', reason: 'the GPU reads healthy again without a reset' };
      if (facts.holders.length > 0) {
        return sameSet(facts.holders, current.holders) ? { do: 'nothing' } : { do: 'wait', holders: facts.holders };
      }
      if (facts.gpuHealthy === undefined || !facts.nodeReady) return { do: 'nothing' };
      return { do: 'reset' };
    case 'resetting': {
      const command = facts.command;
      if (!command || command.state === 'pending' || command.state === 'sent') return { do: 'nothing' };
      if (command.state === 'failed') return { do: 'hold', reason: `the reset did not bring the GPU back: ${command.error ?? 'no reason given'}` };
      // The agent pushes the GPU's recovery before it answers; wait until the store has it.
      return facts.gpuHealthy === true
        ? { do: 'close', outcome: 'returned_to_service', reason: 'the GPU reads healthy after the reset' }
        : { do: 'nothing' };
    }
    case 'held':
      return facts.gpuHealthy === true
        ? { do: 'close', outcome: 'recovered', reason: 'the GPU reads healthy again (an operator reset its health or it recovered)' }
        : { do: 'nothing' };
    case 'node_drained':
      return facts.nodeCordoned ? { do: 'nothing' } : { do: 'close', outcome: 'node_returned', reason: 'an operator uncordoned the node' };
    case 'closed':
      return { do: 'nothing' };
  }
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}
