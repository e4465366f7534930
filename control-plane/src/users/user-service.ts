// The users of an org: invite, list, read, remove. There is no mail or login here: an
// invite is a record plus a `user.invited` event the provider turns into an email.
import { ApiError, newId, toRfc3339, type Clock } from '@svc/shared';
import type { ChangeFeed } from '../changes.js';
import type { ApiKeyRecord, EventRecord } from '../store/records.js';
import type { Store } from '../store/store.js';
import type { UserRecord, UserRemoval } from '../store/user-store.js';
import { KEY_REVOKED, USER_INVITED, USER_REMOVED } from '../webhooks/event-types.js';
import { normalizeEmail, roleMayOwnAdminKey, scopesOutsideRole, type Role } from './roles.js';

/**
 * Users an org may have. An org is a team, not a directory: the cap keeps one admin key
 * from filling the database with invites (and the list unpaged).
 */
export const MAX_USERS_PER_ORG = 1000;

/** A user as the API shows it. */
export function userView(user: UserRecord) {
  return {
    id: user.id,
    object: 'user' as const,
    email: user.email,
    role: user.role,
    status: user.status,
    org_id: user.orgId,
    created: Math.floor(user.createdAt / 1000),
  };
}

export class UserService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly changes: ChangeFeed,
  ) {}

  async invite(orgId: string, input: { email: string; role: Role }, invitedBy: string | null): Promise<UserRecord> {
    const email = normalizeEmail(input.email);
    if (email === null) throw new ApiError('invalid_request', `"${input.email.slice(0, 80)}" is not an email address`, { param: 'email' });
    // Checked before the insert, so replicas racing at the cap may pass it by a few; it bounds, not meters.
    if ((await this.store.users.list(orgId)).length >= MAX_USERS_PER_ORG) {
      throw new ApiError('invalid_request', `an organization has at most ${MAX_USERS_PER_ORG} users; remove one first`, { param: 'email', code: 'too_many_users' });
    }
    const user: UserRecord = { id: newId('user'), orgId, email, role: input.role, status: 'invited', invitedBy, createdAt: this.clock.now() };
    const event = this.event(USER_INVITED, user, { ...userView(user), invited_by: invitedBy });
    if (!(await this.store.users.invite(user, event))) {
      throw new ApiError('conflict', `${email} is already a user of this organization`, { param: 'email', code: 'user_exists' });
    }
    return user;
  }

  list(orgId: string): Promise<UserRecord[]> {
    return this.store.users.list(orgId);
  }

  /** A user of `orgId`; another org's user is as good as missing. */
  async get(userId: string, orgId: string, param?: string): Promise<UserRecord> {
    const user = await this.store.users.get(userId);
    if (!user || user.orgId !== orgId) throw new ApiError('not_found', `no user with id ${userId} in this organization`, param ? { param } : {});
    return user;
  }

  /**
   * Changes the user's role. A narrower role must still cover the user's live keys:
   * revoke (or replace) the keys first, so no key keeps more than its user may hold.
   */
  async setRole(userId: string, orgId: string, role: Role): Promise<UserRecord> {
    await this.get(userId, orgId);
    // Checked on the keys as the store reads them while changing the role, under a lock a
    // key being made for the user waits for: a racing create is seen here, or sees the role.
    const covers = (keys: ApiKeyRecord[]) => {
      const beyond = keys.filter((k) => scopesOutsideRole(role, k.scopes).length > 0 || (k.admin && !roleMayOwnAdminKey(role)));
      if (beyond.length > 0) {
        throw new ApiError('invalid_request', `role ${role} does not cover the user's live keys ${beyond.map((k) => k.id).join(', ')}; revoke them first`, { param: 'role' });
      }
    };
    const user = await this.store.users.setRole(userId, role, covers);
    if (!user) throw new ApiError('not_found', `no user with id ${userId} in this organization`);
    return user;
  }

  /** Removes the user and revokes every key it owns, in one transaction. */
  async remove(userId: string, orgId: string): Promise<UserRemoval> {
    await this.get(userId, orgId);
    const at = this.clock.now();
    const keyEvent = (key: ApiKeyRecord): EventRecord => ({
      id: newId('evt'),
      type: KEY_REVOKED,
      orgId: key.orgId,
      subject: key.id,
      data: { key_id: key.id, prefix: key.prefix, last4: key.last4, revoked_at: toRfc3339(at), user_id: userId },
      createdAt: at,
    });
    const removed = await this.store.users.remove(userId, at, keyEvent, {
      id: newId('evt'),
      type: USER_REMOVED,
      orgId,
      subject: userId,
      data: { id: userId, object: 'user', org_id: orgId, removed_at: toRfc3339(at) },
      createdAt: at,
    });
    if (!removed) throw new ApiError('not_found', `no user with id ${userId} in this organization`);
    for (const key of removed.revokedKeys) this.changes.emit('key', key.id);
    return removed;
  }

  private event(type: string, user: UserRecord, data: Record<string, unknown>): EventRecord {
    return { id: newId('evt'), type, orgId: user.orgId, subject: user.id, data, createdAt: user.createdAt };
  }
}
