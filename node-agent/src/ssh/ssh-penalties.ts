// Which SSH connections cost their source a penalty, and how much (access/source-penalties.ts):
// one that ends without logging in has made the agent do a key exchange for nothing.
// The defaults follow OpenSSH's PerSourcePenalties (sshd 9.8 and later), with two
// differences. A failed login costs what a bare handshake costs (OpenSSH: 5 s): the
// gateway takes keys only, so there is no password to guess and a failure costs the agent
// only CPU, and a user trying their keys one connection at a time gets 15 tries, not 3.
// OpenSSH's "crash" is left out: a connection here cannot crash anything but itself.
import type { PenaltyPolicy } from '../access/source-penalties.js';

export type SshPenaltyKind = 'noauth' | 'authfail' | 'grace-exceeded';

export const SSH_PENALTY_DEFAULTS: Omit<PenaltyPolicy<SshPenaltyKind>, 'exempt'> = {
  durations: { noauth: 1_000, authfail: 1_000, 'grace-exceeded': 10_000 },
  minMs: 15_000,
  maxMs: 600_000,
  maxSources: 65_536,
};

export const SSH_PENALTY_DEFAULT_TEXT = 'noauth:1s authfail:1s grace-exceeded:10s min:15s max:10m max-sources:65536';

export interface ConnectionEnding {
  loggedIn: boolean;
  /** Login attempts refused (the `none` probe not counted). */
  failedLogins: number;
  /**
   * Closed by the gateway before a login: none within SVC_SSH_HANDSHAKE_TIMEOUT_MS, or more
   * sent than a login takes (PRE_LOGIN_BYTES).
   */
  graceExceeded: boolean;
}

/** The penalty a connection's ending earns; undefined for one that logged in. */
export function sshPenaltyOf(ending: ConnectionEnding): SshPenaltyKind | undefined {
  if (ending.loggedIn) return undefined;
  if (ending.graceExceeded) return 'grace-exceeded';
  return ending.failedLogins > 0 ? 'authfail' : 'noauth';
}
