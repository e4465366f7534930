// What a user of an org may do, as the scopes the user's keys may hold. A role is the
// ceiling of its user's keys; the key's own scopes pick within it.
import { SCOPES, type Scope } from '../keys/scopes.js';

export const ROLES = ['admin', 'developer', 'billing', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

export const ROLE_SCOPES: Record<Role, readonly Scope[]> = {
  admin: SCOPES,
  developer: ['inference:write', 'inference:read', 'compute:write', 'compute:read'],
  billing: ['billing:read'],
  viewer: ['inference:read', 'compute:read', 'billing:read'],
};

/** Only an admin user may own an admin key (admin keys manage users and keys). */
export function roleMayOwnAdminKey(role: Role): boolean {
  return role === 'admin';
}

/** The scopes in `scopes` that `role` does not grant, in their given order. */
export function scopesOutsideRole(role: Role, scopes: readonly string[]): string[] {
  const granted = new Set<string>(ROLE_SCOPES[role]);
  return scopes.filter((s) => !granted.has(s));
}

// Deliberately plain: a mailbox is local@domain with a dotted domain; anything
// stranger is refused instead of guessed at. Case is folded whole (RFC 5321 lets the
// local part be case-sensitive, but no mail provider in use treats it so, and two
// invites that differ only in case are one person).
const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

/** The email as stored (trimmed, lower-case), or null when it is not a plain address. */
export function normalizeEmail(input: string): string | null {
  const email = input.trim().toLowerCase();
  if (email.length > 254 || !EMAIL.test(email)) return null;
  const [local] = email.split('@');
  if (local!.startsWith('.') || local!.endsWith('.') || local!.includes('..')) return null;
  return email;
}
