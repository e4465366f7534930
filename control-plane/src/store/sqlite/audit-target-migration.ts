// The SLA counts an instance an operator terminated as ended by the provider, which it
// finds in the operator audit trail by the instance's id (billing/sla-service.ts): an
// index on the target, so that lookup is not a scan of every operator action ever taken.
import type { Migration } from './migrations.js';

export const AUDIT_TARGET_MIGRATION: Migration = {
  version: 23,
  name: 'operator audit: index by target and action',
  sql: `CREATE INDEX operator_audit_target ON operator_audit(target, action);`,
};
