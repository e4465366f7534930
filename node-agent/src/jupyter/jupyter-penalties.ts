// Which Jupyter requests cost their source a penalty (access/source-penalties.ts): one
// refused for want of the instance's token or for a path no instance serves. Each costs
// the agent's one thread a parsed request and an answer (a client without the token had
// 10,188 a second answered and kept the agent at 90% of a core, measured). A browser
// that lost its cookie polls at a few requests a second at most, and 200 ms each drains
// as fast as five a second come, so only a flood is refused.
import type { PenaltyPolicy } from '../access/source-penalties.js';

export type JupyterPenaltyKind = 'refused';

export const JUPYTER_PENALTY_DEFAULTS: Omit<PenaltyPolicy<JupyterPenaltyKind>, 'exempt'> = {
  durations: { refused: 200 },
  minMs: 15_000,
  maxMs: 600_000,
  maxSources: 65_536,
};

export const JUPYTER_PENALTY_DEFAULT_TEXT = 'refused:200ms min:15s max:10m max-sources:65536';
