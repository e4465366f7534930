// Turns a presented key value into the principal behind it, or the reason it is refused.
// Verified principals are cached briefly; changes made in this process evict at once.
import { timingSafeEqual } from 'node:crypto';
import type { Clock } from '@svc/shared';
import type { ChangeFeed } from '../changes.js';
import { compileAllowlist, type ParsedCidr } from '../orgs/ip-allowlist.js';
import { parseOriginPattern, type OriginPattern } from '../orgs/referrer-allowlist.js';
import type { ApiKeyRecord, OrgRecord } from '../store/records.js';
import type { Store } from '../store/store.js';
import { hashKeyValue, kindOfKeyValue } from './api-key.js';

export interface Principal {
  key: ApiKeyRecord;
  org: OrgRecord;
  ipAllowlist: ParsedCidr[];
  referrerAllowlist: OriginPattern[];
  /** When this value stops validating (rotation overlap), or null. */
  expiresAt: number | null;
}

export type Verification = { ok: true; principal: Principal } | { ok: false; reason: string };

interface CacheEntry {
  principal: Principal;
  cachedAt: number;
}

export class KeyVerifier {
  private readonly cache = new Map<string, CacheEntry>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cacheMs: number,
    changes: ChangeFeed,
  ) {
    changes.on('key', (keyId) => this.evict((p) => p.key.id === keyId));
    changes.on('org', (orgId) => this.evict((p) => p.org.id === orgId));
  }

  async verify(value: string): Promise<Verification> {
    if (!kindOfKeyValue(value)) return { ok: false, reason: 'malformed API key' };
    const hash = hashKeyValue(value);
    const cacheKey = hash.toString('base64');
    const now = this.clock.now();

    let principal = this.cache.get(cacheKey);
    if (!principal || now - principal.cachedAt >= this.cacheMs) {
      const loaded = await this.load(hash);
      if (!loaded) {
        this.cache.delete(cacheKey);
        return { ok: false, reason: 'invalid API key' };
      }
      principal = { principal: loaded, cachedAt: now };
      if (this.cacheMs > 0) this.cache.set(cacheKey, principal);
    }

    const { key, expiresAt } = principal.principal;
    if (key.revokedAt !== null) return { ok: false, reason: 'this API key has been revoked' };
    if (expiresAt !== null && now >= expiresAt) {
      return { ok: false, reason: 'this API key value was rotated out; use the new value' };
    }
    return { ok: true, principal: principal.principal };
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
    for (const [k, entry] of this.cache) if (match(entry.principal)) this.cache.delete(k);
  }
}
