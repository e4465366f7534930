// How stored records are shown on the API: snake_case, seconds for `created`, RFC 3339
// for other times, and never a key's value or hash.
import { Type } from '@sinclair/typebox';
import { toRfc3339, toUnixSeconds } from '@svc/shared';
import type { ApiKeyRecord, OrgRecord } from '../store/records.js';

export const KeyView = Type.Object(
  {
    key_id: Type.String(),
    object: Type.Literal('api_key'),
    name: Type.Union([Type.String(), Type.Null()]),
    kind: Type.String({ description: 'live, test or public' }),
    prefix: Type.String(),
    last4: Type.String(),
    masked: Type.String({ description: 'prefix + … + last 4 characters' }),
    scopes: Type.Array(Type.String()),
    admin: Type.Boolean(),
    org_id: Type.String(),
    created: Type.Integer(),
    revoked: Type.Boolean(),
    revoked_at: Type.Union([Type.String(), Type.Null()]),
    user_id: Type.Union([Type.String(), Type.Null()], { description: 'The org user who owns the key (revoked with the user); null for an org key.' }),
  },
  { $id: 'ApiKey' },
);

export function keyView(key: ApiKeyRecord) {
  return {
    key_id: key.id,
    object: 'api_key' as const,
    name: key.name,
    kind: key.kind,
    prefix: key.prefix,
    last4: key.last4,
    masked: `${key.prefix}…${key.last4}`,
    scopes: key.scopes,
    admin: key.admin,
    org_id: key.orgId,
    created: toUnixSeconds(key.createdAt),
    revoked: key.revokedAt !== null,
    revoked_at: key.revokedAt === null ? null : toRfc3339(key.revokedAt),
    user_id: key.userId ?? null,
  };
}

export const OrgView = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('organization'),
    name: Type.String(),
    tier: Type.Integer(),
    ip_allowlist: Type.Array(Type.String()),
    referrer_allowlist: Type.Array(Type.String()),
    allowed_models: Type.Union([Type.Array(Type.String()), Type.Null()]),
    default_pool: Type.Union([Type.String(), Type.Null()], { description: 'Used when a request pins no pool (X-Service-Pool, an instance\'s pool); null: any pool.' }),
    gpu_quota: Type.Union([Type.Integer(), Type.Null()], {
      description: "GPUs the organization's instances may hold at once, set by the provider; null: the provider's default. A create past it is refused with 403 quota_exceeded.",
    }),
    created: Type.Integer(),
  },
  { $id: 'Organization' },
);

export function orgView(org: OrgRecord) {
  return {
    id: org.id,
    object: 'organization' as const,
    name: org.name,
    tier: org.tier,
    ip_allowlist: org.ipAllowlist,
    referrer_allowlist: org.referrerAllowlist,
    allowed_models: org.allowedModels,
    default_pool: org.defaultPool ?? null,
    gpu_quota: org.gpuQuota ?? null,
    created: toUnixSeconds(org.createdAt),
  };
}
