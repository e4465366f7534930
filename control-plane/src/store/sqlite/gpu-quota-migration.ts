// An org's own GPU quota, set by the provider (svcctl orgs set --gpu-quota): null means the
// default, SVC_ORG_MAX_GPUS.
import type { Migration } from './migrations.js';

export const GPU_QUOTA_MIGRATION: Migration = {
  version: 25,
  name: "orgs: the provider's GPU quota per org",
  sql: `ALTER TABLE orgs ADD COLUMN gpu_quota INTEGER CHECK (gpu_quota IS NULL OR gpu_quota >= 0);`,
};
