// Creating, listing, rotating and revoking API keys. A key value exists only in the
// answer to create or rotate; the store keeps its SHA-256.
import type { Clock } from '@svc/shared/clock';
import { ApiError } from '@svc/shared/errors';
import { newId } from '@svc/shared/ids';
import type { ChangeFeed } from '../changes.js';
import type { ApiKeyRecord, KeyKind, KeySecretRecord } from '../store/records.js';
import type { ActiveKeyCounts, Store } from '../store/store.js';
import { KEY_PREFIXES, generateKeyValue, hashKeyValue, lastFour } from './api-key.js';
import { ROLE_SCOPES, roleMayOwnAdminKey, scopesOutsideRole } from '../users/roles.js';
import type { UserRecord } from '../store/user-store.js';
import { DEFAULT_SCOPES, PUBLIC_KEY_SCOPES, SANDBOX_REFUSAL, SANDBOX_REFUSED_SCOPES, SCOPES, isScope, type Scope } from './scopes.js';

/** Active (unrevoked) keys one organization may hold. */
export const MAX_ACTIVE_KEYS_PER_ORG = 1000;
/** Of those, sandbox keys: each is free up to its daily tokens. */
export const MAX_ACTIVE_TEST_KEYS_PER_ORG = 20;
export const DEFAULT_OVERLAP_SECONDS = 86_400;
export const MAX_OVERLAP_SECONDS = 30 * 86_400;

export interface CreateKeyInput {
  orgId: string;
  kind?: KeyKind;
  scopes?: string[];
  admin?: boolean;
  name?: string | null;
  /** The org user who owns the key: its role caps the key's scopes, and removing the user revokes it. */
  userId?: string | null;
  /**
   * The key making this one (`POST /v1/admin/keys`): the new key holds no scope the caller
   * lacks, and a sandbox caller makes sandbox keys only. Absent for the provider (svcctl).
   */
  caller?: ApiKeyRecord;
}

export interface CreatedKey {
  record: ApiKeyRecord;
  value: string;
}

export interface RotatedKey extends CreatedKey {
  oldKeyExpiresAt: number;
}

function checkScopes(scopes: string[], kind: KeyKind, admin: boolean): Scope[] {
  const unique = [...new Set(scopes)];
  unique.forEach((scope, i) => {
    if (!isScope(scope)) {
      throw new ApiError('invalid_request', `unknown scope "${scope}"; scopes are: ${SCOPES.join(', ')}`, { param: `scopes[${i}]` });
    }
  });
  const valid = unique as Scope[];
  if (valid.includes('admin:write') && !admin) {
    throw new ApiError('invalid_request', 'admin:write is only granted to admin keys', { param: 'scopes' });
  }
  if (kind === 'public') {
    const outside = valid.filter((s) => !PUBLIC_KEY_SCOPES.has(s));
    if (outside.length > 0) {
      throw new ApiError('invalid_request', `public keys may not carry ${outside.join(', ')}`, { param: 'scopes' });
    }
  }
  if (kind === 'test' && valid.some((s) => SANDBOX_REFUSED_SCOPES.has(s))) {
    throw new ApiError('invalid_request', `${SANDBOX_REFUSAL}; compute:write cannot be granted to a test key`, { param: 'scopes' });
  }
  return valid;
}

/**
 * A key hands out no more power than it holds: whoever holds a key value can do what the
 * key can, so a key that could make (or rotate, and so read) a stronger one would be that
 * stronger key. A sandbox key is free, so everything it makes must be free too.
 */
function checkWithinCaller(caller: ApiKeyRecord, key: { kind: KeyKind; admin: boolean; scopes: readonly string[] }, what: string): void {
  if (caller.kind === 'test' && key.kind !== 'test') {
    throw new ApiError(
      'forbidden_scope',
      `this is a sandbox key (svc_sk_test_), which is free; it cannot ${what} a ${key.kind} key, which is billed: use kind "test" or a live admin key`,
      { param: 'kind' },
    );
  }
  const lacking = key.scopes.filter((s) => !caller.scopes.includes(s));
  if (lacking.length > 0) {
    throw new ApiError('forbidden_scope', `a key cannot ${what} a key with scopes it does not hold itself: this key lacks ${lacking.join(', ')}`, { param: 'scopes' });
  }
  if (key.admin && !caller.admin) {
    throw new ApiError('forbidden_scope', `only an admin key can ${what} an admin key`, { param: 'admin' });
  }
}

/** The key's owner, `user` as read: a user of `orgId` that may own an admin key if `admin`. */
function checkOwner(user: UserRecord | undefined, orgId: string, userId: string, admin: boolean): UserRecord {
  if (!user || user.orgId !== orgId) throw new ApiError('invalid_request', `user_id ${userId} is not a user of this organization`, { param: 'user_id' });
  if (admin && !roleMayOwnAdminKey(user.role)) {
    throw new ApiError('invalid_request', `user ${userId} has role ${user.role}; only admin users own admin keys`, { param: 'admin' });
  }
  return user;
}

function checkRoleGrants(owner: UserRecord, scopes: readonly string[]): void {
  const outside = scopesOutsideRole(owner.role, scopes);
  if (outside.length > 0) {
    throw new ApiError('invalid_request', `user ${owner.id} has role ${owner.role}, which does not grant ${outside.join(', ')}`, { param: 'scopes' });
  }
}

/**
 * Who owns a key that `caller` makes. Removing a user revokes the keys it owns, and nothing
 * else: a key a user's key made for someone else (another user, or the org itself) would
 * be a value in that user's hands that outlives it. So a user's key makes keys for its
 * own user only, and that is the default; only a key of the org itself (no user) picks.
 */
function ownerForCaller(caller: ApiKeyRecord, requested: string | null | undefined): string | null | undefined {
  if (!caller.userId) return requested;
  if (requested === undefined || requested === caller.userId) return caller.userId;
  throw new ApiError(
    'forbidden_scope',
    `this key belongs to user ${caller.userId} and makes keys for that user only, so that none outlives the user; ` +
      `a key for ${requested === null ? 'the organization itself' : `user ${requested}`} is made by a key of the organization (one with no user_id)`,
    { param: 'user_id' },
  );
}

/** A user's key rotates (and so reads the value of) only its own user's keys, as it makes only those. */
function checkOwnedByCallersUser(caller: ApiKeyRecord, key: ApiKeyRecord): void {
  if (caller.userId && key.userId !== caller.userId) {
    throw new ApiError(
      'forbidden_scope',
      `this key belongs to user ${caller.userId} and rotates that user's keys only; key ${key.id} is ${key.userId ? `user ${key.userId}'s` : "the organization's"}`,
      { param: 'key_id' },
    );
  }
}

export class KeyService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly changes: ChangeFeed,
  ) {}

  async create(input: CreateKeyInput): Promise<CreatedKey> {
    const kind = input.kind ?? 'live';
    const admin = input.admin ?? false;
    if (admin && kind === 'public') {
      throw new ApiError('invalid_request', 'public keys cannot be admin keys', { param: 'admin' });
    }
    if (input.caller) checkWithinCaller(input.caller, { kind, admin, scopes: [] }, 'create');
    if (!(await this.store.orgs.get(input.orgId))) {
      throw new ApiError('not_found', `no org with id ${input.orgId}`, { param: 'org' });
    }
    // An admin key without explicit scopes gets all its kind may hold; anything else the spec default.
    const allScopes = kind === 'test' ? SCOPES.filter((s) => !SANDBOX_REFUSED_SCOPES.has(s)) : [...SCOPES];
    const userId = input.caller ? ownerForCaller(input.caller, input.userId) : input.userId;
    const owner = userId ? checkOwner(await this.store.users.get(userId), input.orgId, userId, admin) : null;
    // A user's key without explicit scopes gets what the user's role grants and its kind may hold.
    const defaults = owner
      ? allScopes.filter((s) => ROLE_SCOPES[owner.role].includes(s) && (admin || s !== 'admin:write') && (kind !== 'public' || PUBLIC_KEY_SCOPES.has(s)))
      : admin ? allScopes : DEFAULT_SCOPES;
    const scopes = checkScopes(input.scopes ?? defaults, kind, admin);
    if (scopes.length === 0) throw new ApiError('invalid_request', 'a key needs at least one scope', { param: 'scopes' });
    if (input.caller) checkWithinCaller(input.caller, { kind, admin, scopes }, 'create');
    if (owner) checkRoleGrants(owner, scopes);

    // Limits are per key, so keys without end would be limits without end. Checked here
    // (a cheap early answer) and again by the store in the insert's transaction, under a
    // per-org lock every create takes: parallel creates are counted one after another, so
    // the caps are exact.
    const mayAdd = (counts: ActiveKeyCounts): void => {
      if (counts.all >= MAX_ACTIVE_KEYS_PER_ORG) {
        throw new ApiError('invalid_request', `an organization has at most ${MAX_ACTIVE_KEYS_PER_ORG} active API keys; revoke one first`, { code: 'too_many_keys' });
      }
      // Sandbox keys are free, each up to its daily tokens (and requests per minute): what the
      // org gets for nothing would otherwise grow with every key it makes.
      if (kind === 'test' && counts.test >= MAX_ACTIVE_TEST_KEYS_PER_ORG) {
        throw new ApiError(
          'invalid_request',
          `an organization has at most ${MAX_ACTIVE_TEST_KEYS_PER_ORG} active sandbox keys (svc_sk_test_), which are free up to their daily tokens each; revoke one first`,
          { code: 'too_many_keys' },
        );
      }
    };
    const active = (await this.store.keys.list(input.orgId)).filter((k) => k.revokedAt === null);
    mayAdd({ all: active.length, test: active.filter((k) => k.kind === 'test').length });
    const value = generateKeyValue(kind);
    const now = this.clock.now();
    const record: ApiKeyRecord = {
      id: newId('key'),
      orgId: input.orgId,
      name: input.name ?? null,
      kind,
      admin,
      scopes,
      prefix: KEY_PREFIXES[kind],
      last4: lastFour(value),
      createdAt: now,
      revokedAt: null,
      ...(owner ? { userId: owner.id } : {}),
    };
    // The owner is checked again as the store holds it while inserting: a role change or
    // removal racing this create either waits for the key (and then sees it) or is seen
    // here, so no key outlives its user or keeps more than the user's role grants.
    const mayOwn = owner ? (user: UserRecord | undefined) => checkRoleGrants(checkOwner(user, input.orgId, owner.id, admin), scopes) : undefined;
    await this.store.keys.create(record, this.secretFor(record.id, value, now), mayOwn, mayAdd);
    return { record, value };
  }

  async list(orgId?: string): Promise<ApiKeyRecord[]> {
    return this.store.keys.list(orgId);
  }

  /** A key by id; with `orgId`, keys of other orgs are as good as missing. */
  async get(keyId: string, orgId?: string): Promise<ApiKeyRecord> {
    const key = await this.store.keys.get(keyId);
    if (!key || (orgId !== undefined && key.orgId !== orgId)) throw new ApiError('not_found', `no API key with id ${keyId}`);
    return key;
  }

  /** With `caller` (the route), the caller must hold all the key holds: rotating hands over a value. */
  async rotate(keyId: string, overlapSeconds = DEFAULT_OVERLAP_SECONDS, orgId?: string, caller?: ApiKeyRecord): Promise<RotatedKey> {
    const key = await this.get(keyId, orgId);
    if (key.revokedAt !== null) throw new ApiError('invalid_request', `key ${keyId} is revoked and cannot be rotated`);
    if (caller) {
      checkOwnedByCallersUser(caller, key);
      checkWithinCaller(caller, key, 'rotate');
    }
    const value = generateKeyValue(key.kind);
    const now = this.clock.now();
    const oldKeyExpiresAt = now + overlapSeconds * 1000;
    const record = await this.store.keys.rotate(keyId, this.secretFor(keyId, value, now), oldKeyExpiresAt);
    if (!record) throw new ApiError('not_found', `no API key with id ${keyId}`);
    this.changes.emit('key', keyId);
    return { record, value, oldKeyExpiresAt };
  }

  async revoke(keyId: string, orgId?: string): Promise<ApiKeyRecord> {
    const key = await this.get(keyId, orgId);
    const at = this.clock.now();
    const result = await this.store.keys.revoke(keyId, at, {
      id: newId('evt'),
      type: 'key.revoked',
      orgId: key.orgId,
      subject: keyId,
      data: { key_id: keyId, prefix: key.prefix, last4: key.last4, revoked_at: new Date(at).toISOString() },
      createdAt: at,
    });
    if (!result) throw new ApiError('not_found', `no API key with id ${keyId}`);
    this.changes.emit('key', keyId);
    return result.key;
  }

  private secretFor(keyId: string, value: string, now: number): KeySecretRecord {
    return { hash: hashKeyValue(value), keyId, last4: lastFour(value), createdAt: now, expiresAt: null };
  }
}
