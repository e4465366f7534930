import { describe, expect, it } from 'vitest';
import { parsePenaltyPolicy } from '../access/source-penalties.js';
import { SSH_PENALTY_DEFAULTS, SSH_PENALTY_DEFAULT_TEXT, sshPenaltyOf } from './ssh-penalties.js';

describe('sshPenaltyOf', () => {
  it.each([
    [{ loggedIn: true, failedLogins: 3, graceExceeded: false }, undefined],
    [{ loggedIn: false, failedLogins: 0, graceExceeded: false }, 'noauth'],
    [{ loggedIn: false, failedLogins: 2, graceExceeded: false }, 'authfail'],
    [{ loggedIn: false, failedLogins: 2, graceExceeded: true }, 'grace-exceeded'],
    [{ loggedIn: false, failedLogins: 0, graceExceeded: true }, 'grace-exceeded'],
  ])('%j -> %s', (ending, kind) => expect(sshPenaltyOf(ending)).toBe(kind));

  it('the documented default text is the default policy', () => {
    expect(parsePenaltyPolicy(SSH_PENALTY_DEFAULT_TEXT, SSH_PENALTY_DEFAULTS, [])).toEqual({ ...SSH_PENALTY_DEFAULTS, exempt: [] });
  });
});
