// Organizations: tier, IP allowlist, referrer allowlist and which models they may call.
import { ApiError, newId, type Clock } from '@svc/shared';
import type { ChangeFeed } from '../changes.js';
import type { OrgRecord } from '../store/records.js';
import type { Store } from '../store/store.js';
import { isValidCidr, normalizeCidr } from './ip-allowlist.js';
import { isValidOriginPattern } from './referrer-allowlist.js';

export const DEFAULT_ORG_NAME = 'default';
const MAX_LIST_ENTRIES = 100;

export interface OrgPatch {
  name?: string;
  tier?: number;
  ipAllowlist?: string[];
  referrerAllowlist?: string[];
  allowedModels?: string[] | null;
  defaultPool?: OrgRecord['defaultPool'];
  /** null: back to the provider's default. */
  gpuQuota?: number | null;
}

const ORG_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const MAX_GPU_QUOTA = 100_000;

/** SQLite and PostgreSQL both report a unique-key violation; either means the name is taken. */
function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === '23505';
}

function checkList(list: string[], param: string, valid: (s: string) => boolean, what: string): void {
  if (list.length > MAX_LIST_ENTRIES) {
    throw new ApiError('invalid_request', `${param} has ${list.length} entries; at most ${MAX_LIST_ENTRIES}`, { param });
  }
  list.forEach((entry, i) => {
    if (!valid(entry)) throw new ApiError('invalid_request', `${param}[${i}] is not ${what}: "${entry}"`, { param: `${param}[${i}]` });
  });
}

export class OrgService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly changes: ChangeFeed,
  ) {}

  /** The first start creates an org so a newcomer can create a key right away. */
  async ensureDefaultOrg(): Promise<{ org: OrgRecord; created: boolean }> {
    const existing = await this.store.orgs.list();
    if (existing[0]) return { org: existing[0], created: false };
    return { org: await this.create(DEFAULT_ORG_NAME), created: true };
  }

  async create(name: string, tier: 2 | 3 = 2): Promise<OrgRecord> {
    if (!ORG_NAME.test(name)) {
      throw new ApiError('invalid_request', 'org name must be 1-63 lowercase letters, digits or dashes', { param: 'name' });
    }
    if (await this.store.orgs.getByName(name)) {
      throw new ApiError('invalid_request', `an org named "${name}" already exists`, { param: 'name' });
    }
    const org: OrgRecord = {
      id: newId('org'),
      name,
      tier,
      ipAllowlist: [],
      referrerAllowlist: [],
      allowedModels: null,
      createdAt: this.clock.now(),
    };
    await this.store.orgs.create(org);
    return org;
  }

  async list(): Promise<OrgRecord[]> {
    return this.store.orgs.list();
  }

  async get(id: string): Promise<OrgRecord> {
    const org = await this.store.orgs.get(id);
    if (!org) throw new ApiError('not_found', `no org with id ${id}`);
    return org;
  }

  /** An org by id or name, for the CLI. */
  async resolve(idOrName: string): Promise<OrgRecord> {
    const org = (await this.store.orgs.get(idOrName)) ?? (await this.store.orgs.getByName(idOrName));
    if (!org) throw new ApiError('not_found', `no org with id or name "${idOrName}"`);
    return org;
  }

  async update(id: string, patch: OrgPatch): Promise<OrgRecord> {
    const clean: Parameters<Store['orgs']['update']>[1] = {};
    if (patch.tier !== undefined) {
      if (patch.tier !== 2 && patch.tier !== 3) throw new ApiError('invalid_request', 'tier must be 2 or 3', { param: 'tier' });
      clean.tier = patch.tier;
    }
    if (patch.ipAllowlist !== undefined) {
      checkList(patch.ipAllowlist, 'ip_allowlist', isValidCidr, 'an IPv4 or IPv6 CIDR range');
      clean.ipAllowlist = [...new Set(patch.ipAllowlist.map(normalizeCidr))];
    }
    if (patch.referrerAllowlist !== undefined) {
      checkList(patch.referrerAllowlist, 'referrer_allowlist', isValidOriginPattern, 'an origin pattern such as https://*.example.com');
      clean.referrerAllowlist = [...new Set(patch.referrerAllowlist.map((s) => s.trim().toLowerCase()))];
    }
    if (patch.allowedModels !== undefined) clean.allowedModels = patch.allowedModels;
    if (patch.defaultPool !== undefined) clean.defaultPool = patch.defaultPool;
    if (patch.gpuQuota !== undefined) {
      if (patch.gpuQuota !== null && !(Number.isInteger(patch.gpuQuota) && patch.gpuQuota >= 0 && patch.gpuQuota <= MAX_GPU_QUOTA)) {
        throw new ApiError('invalid_request', `gpu_quota must be a whole number from 0 to ${MAX_GPU_QUOTA}, or null for the default`, { param: 'gpu_quota' });
      }
      clean.gpuQuota = patch.gpuQuota;
    }
    if (patch.name !== undefined) {
      if (!ORG_NAME.test(patch.name)) {
        throw new ApiError('invalid_request', 'org name must be 1-63 lowercase letters, digits or dashes', { param: 'name' });
      }
      const holder = await this.store.orgs.getByName(patch.name);
      if (holder && holder.id !== id) throw new ApiError('conflict', `an org named "${patch.name}" already exists`, { param: 'name', code: 'name_taken' });
      clean.name = patch.name;
    }
    let org: OrgRecord | undefined;
    try {
      org = await this.store.orgs.update(id, clean);
    } catch (err) {
      // Two renames to one name at once: the unique key settles it.
      if (isUniqueViolation(err)) throw new ApiError('conflict', `an org named "${patch.name}" already exists`, { param: 'name', code: 'name_taken' });
      throw err;
    }
    if (!org) throw new ApiError('not_found', `no org with id ${id}`);
    this.changes.emit('org', id);
    return org;
  }
}
