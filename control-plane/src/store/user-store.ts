// The users of an org. A user is a record (no login exists in this stack): an email,
// a role that caps the scopes of the keys the user owns, and whether the invite has
// been taken up. Removing a user revokes every key the user owns in the same unit of work.
import type { ApiKeyRecord, EventRecord } from './records.js';

export type UserRole = 'admin' | 'developer' | 'billing' | 'viewer';
export type UserStatus = 'invited' | 'active';

export interface UserRecord {
  id: string;
  orgId: string;
  /** Lower-case; unique within the org. */
  email: string;
  role: UserRole;
  status: UserStatus;
  /** The key that sent the invite; null when made by the operator. */
  invitedBy: string | null;
  createdAt: number;
}

export interface UserRemoval {
  user: UserRecord;
  /** Keys this removal revoked (keys revoked before are left as they were). */
  revokedKeys: ApiKeyRecord[];
}

export interface UserStore {
  /** Adds `user` and appends `event`; false when the org already has a user with that email. */
  invite(user: UserRecord, event: EventRecord): Promise<boolean>;
  get(id: string): Promise<UserRecord | undefined>;
  list(orgId: string): Promise<UserRecord[]>;
  /**
   * Sets the user's role; undefined when there is no such user. `covers` is called with the
   * user's live keys, read under a lock that a key being made for the user waits for; if it
   * throws, the role is left as it was and the error is re-thrown.
   */
  setRole(id: string, role: UserRole, covers?: (liveKeys: ApiKeyRecord[]) => void): Promise<UserRecord | undefined>;
  /**
   * Deletes the user, revokes every unrevoked key it owns and appends one event per
   * revoked key (`keyEvent`) and `event`, atomically. Undefined when there is no such user.
   */
  remove(id: string, at: number, keyEvent: (key: ApiKeyRecord) => EventRecord, event: EventRecord): Promise<UserRemoval | undefined>;
}
