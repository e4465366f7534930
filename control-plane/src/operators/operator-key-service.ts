// Operator keys: create (value shown once), list, revoke, and verify a presented value.
// Verification looks the key up by its SHA-256 digest and compares digests in constant
// time, so neither the lookup nor the comparison depends on how much of a guess is right.
import { timingSafeEqual } from 'node:crypto';
import { ApiError, newId, toRfc3339, type Clock } from '@svc/shared';
import type { OperatorKeyRecord, OperatorScope, OperatorStore } from '../store/operator-store.js';
import { OPERATOR_SCOPES, generateOperatorKeyValue, hashOperatorKeyValue, isOperatorKeyValue, isOperatorScope } from './operator-key.js';

/** `unknown`: the store has no such key (not a revoked one). */
export type OperatorVerification = { ok: true; key: OperatorKeyRecord } | { ok: false; reason: string; unknown?: true };

/** Digests remembered as having verified; past it, the memory starts over. */
const MAX_SEEN = 10_000;

export class OperatorKeyService {
  /** Digests of values that verified in this process: their lookups are never refused as a stranger's guesses. */
  private readonly seenDigests = new Set<string>();

  constructor(
    private readonly store: OperatorStore,
    private readonly clock: Clock,
  ) {}

  async create(input: { scopes: string[]; name?: string | null; createdBy: string }): Promise<{ record: OperatorKeyRecord; value: string }> {
    const scopes = [...new Set(input.scopes)];
    if (scopes.length === 0) throw new ApiError('invalid_request', `an operator key needs a scope: ${OPERATOR_SCOPES.join(' or ')}`, { param: 'scopes' });
    const bad = scopes.find((s) => !isOperatorScope(s));
    if (bad !== undefined) throw new ApiError('invalid_request', `unknown operator scope "${bad}"; scopes are: ${OPERATOR_SCOPES.join(', ')}`, { param: 'scopes' });
    const value = generateOperatorKeyValue();
    const record: OperatorKeyRecord = {
      id: newId('opk'),
      name: input.name ?? null,
      scopes: scopes as OperatorScope[],
      last4: value.slice(-4),
      createdAt: this.clock.now(),
      createdBy: input.createdBy,
      revokedAt: null,
    };
    await this.store.createKey(record, hashOperatorKeyValue(value));
    return { record, value };
  }

  async list(): Promise<OperatorKeyRecord[]> {
    return this.store.listKeys();
  }

  async revoke(id: string): Promise<OperatorKeyRecord> {
    const key = await this.store.revokeKey(id, this.clock.now());
    if (!key) throw new ApiError('not_found', `no operator key with id ${id}`);
    return key;
  }

  /**
   * `beforeLookup` is told, just before the store is asked, whether this value verified in
   * this process before (revoked since or not: the lookup decides); it may throw to refuse
   * the lookup (the unknown-key guard), as KeyVerifier.verify's.
   */
  async verify(value: string, beforeLookup?: (known: boolean) => void): Promise<OperatorVerification> {
    if (!isOperatorKeyValue(value)) return { ok: false, reason: 'malformed operator key' };
    const digest = hashOperatorKeyValue(value);
    const seenAs = digest.toString('base64');
    beforeLookup?.(this.seenDigests.has(seenAs));
    const found = await this.store.findKeyByHash(digest);
    if (!found || !timingSafeEqual(found.hash, digest)) return { ok: false, reason: 'invalid operator key', unknown: true };
    if (found.key.revokedAt !== null) return { ok: false, reason: 'this operator key has been revoked' };
    if (this.seenDigests.size >= MAX_SEEN) this.seenDigests.clear();
    this.seenDigests.add(seenAs);
    return { ok: true, key: found.key };
  }
}

export function operatorKeyView(key: OperatorKeyRecord) {
  return {
    id: key.id,
    object: 'operator_key' as const,
    name: key.name,
    scopes: key.scopes,
    masked: `svcop_…${key.last4}`,
    created_at: toRfc3339(key.createdAt),
    created_by: key.createdBy,
    revoked: key.revokedAt !== null,
    revoked_at: key.revokedAt === null ? null : toRfc3339(key.revokedAt),
  };
}
