// Turns a presented key value into the principal behind it, or the reason it is refused.
// Verified principals are cached briefly; a change notice (changes.ts: from this process
// or, on PostgreSQL, any process) evicts at once.
import { timingSafeEqual } from 'node:crypto';
import type { Clock } from '@svc/shared';
import type { ChangeFeed } from '../changes.js';
import { compileAllowlist, type ParsedCidr } from '../orgs/ip-allowlist.js';
import { parseOriginPattern, type OriginPattern } from '../orgs/referrer-allowlist.js';
import type { ApiKeyRecord, OrgRecord } from '../store/records.js';
import type { Store } from '../store/store.js';
import { hashKeyValue, hashKeyValueBase64, kindOfKeyValue } from './api-key.js';
import { looksLikeOperatorKey } from '../operators/operator-key.js';

export interface Principal {
  key: ApiKeyRecord;
  org: OrgRecord;
  ipAllowlist: ParsedCidr[];
  referrerAllowlist: OriginPattern[];
  /** When this value stops validating (rotation overlap), or null. */
  expiresAt: number | null;
}

/** `unknown`: the store has no such key (not a revoked or rotated-out one). */
export type Verification = { ok: true; principal: Principal } | { ok: false; reason: string; unknown?: true };

interface CacheEntry {
  principal: Principal;
  cachedAt: number;
}

export class KeyVerifier {
  private readonly cache = new Map<string, CacheEntry>();
  /**
   * Bumped by every eviction: a lookup that started before one may have read the old
   * row, so its answer is returned but not cached (it would outlive the revoke).
   */
  private generation = 0;
  /**
   * Lookups in flight, by cache key: the requests that arrive together with a key not
   * cached (a cold start, an entry just expired under load) share one, instead of each
   * asking the store (hundreds of concurrent requests would queue on the pool).
   */
  private readonly loading = new Map<string, { generation: number; principal: Promise<Principal | undefined> }>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cacheMs: number,
    changes: ChangeFeed,
  ) {
    changes.on('key', (keyId) => this.evict((p) => p.key.id === keyId));
    changes.on('org', (orgId) => this.evict((p) => p.org.id === orgId));
    changes.on('reset', () => this.evict(() => true));
  }

  /**
   * The answer from the cache alone, synchronously, or undefined when the store must be
   * asked (verify). Most requests end here, so the hot path allocates no promise.
   */
  verifyCached(value: string): Verification | undefined {
    return malformed(value) ?? this.fresh(hashKeyValueBase64(value), this.clock.now());
  }

  /**
   * The answer, from the store when the cache has none. `beforeLookup` is told, just before
   * the store is asked, whether this key verified here before (its entry aged out since:
   * entries stay until an eviction); it may throw to refuse the lookup (the unknown-key guard).
   */
  async verify(value: string, beforeLookup?: (known: boolean) => void): Promise<Verification> {
    const refused = malformed(value);
    if (refused) return refused;
    const hash = hashKeyValue(value);
    const cacheKey = hash.toString('base64');
    const now = this.clock.now();
    const cached = this.fresh(cacheKey, now);
    if (cached) return cached;
    beforeLookup?.(this.cache.has(cacheKey));
    const generation = this.generation;
    const loaded = await this.shared(cacheKey, hash, generation);
    if (!loaded) {
      this.cache.delete(cacheKey);
      return { ok: false, reason: 'invalid API key', unknown: true };
    }
    if (this.cacheMs > 0 && generation === this.generation) this.cache.set(cacheKey, { principal: loaded, cachedAt: now });
    return this.check(loaded, now);
  }

  /** One lookup per key and generation: a lookup begun before an eviction is not joined. */
  private shared(cacheKey: string, hash: Buffer, generation: number): Promise<Principal | undefined> {
    const inFlight = this.loading.get(cacheKey);
    if (inFlight && inFlight.generation === generation) return inFlight.principal;
    const entry = { generation, principal: this.load(hash) };
    this.loading.set(cacheKey, entry);
    const forget = (): void => {
      if (this.loading.get(cacheKey) === entry) this.loading.delete(cacheKey);
    };
    entry.principal.then(forget, forget);
    return entry.principal;
  }

  private fresh(cacheKey: string, now: number): Verification | undefined {
    const entry = this.cache.get(cacheKey);
    if (!entry || now - entry.cachedAt >= this.cacheMs) return undefined;
    return this.check(entry.principal, now);
  }

  private check(principal: Principal, now: number): Verification {
    if (principal.key.revokedAt !== null) return { ok: false, reason: 'this API key has been revoked' };
    if (principal.expiresAt !== null && now >= principal.expiresAt) {
      return { ok: false, reason: 'this API key value was rotated out; use the new value' };
    }
    return { ok: true, principal };
  }

  private async load(hash: Buffer): Promise<Principal | undefined> {
    const found = await this.store.keys.findBySecretHash(hash);
    // The index lookup already matched; the explicit comparison keeps the check constant-time.
    if (!found || !timingSafeEqual(found.secret.hash, hash)) return undefined;
    const org = await this.store.orgs.get(found.key.orgId);
    if (!org) return undefined;
    return {
      key: found.key,
      org,
      ipAllowlist: compileAllowlist(org.ipAllowlist),
      referrerAllowlist: org.referrerAllowlist.flatMap((p) => parseOriginPattern(p) ?? []),
      expiresAt: found.secret.expiresAt,
    };
  }

  private evict(match: (p: Principal) => boolean): void {
    this.generation++;
    for (const [k, entry] of this.cache) if (match(entry.principal)) this.cache.delete(k);
  }
}

function malformed(value: string): Verification | undefined {
  if (kindOfKeyValue(value)) return undefined;
  return { ok: false, reason: looksLikeOperatorKey(value) ? 'operator keys (svcop_) are for the operator API (/ops/v1) only; use an API key of your org' : 'malformed API key' };
}
