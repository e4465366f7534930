// Schema for billing integrity: the charges ledger takes `refund` lines (credits with a
// negative amount; the ledger stays append-only), and a node an operator settled with
// `svcctl nodes forget` is marked, so its agent is refused if it ever reconnects.
// Version 12: lower free versions are left to feature branches merged side by side.
import type { Migration } from './migrations.js';

export const BILLING_INTEGRITY_MIGRATION: Migration = {
  version: 12,
  name: 'charges take refund lines; nodes.forgotten_at',
  sql: `
    CREATE TABLE charges_with_refunds (
      id TEXT PRIMARY KEY,
      org_id TEXT NOT NULL,
      instance_id TEXT NOT NULL,
      kind TEXT NOT NULL CHECK (kind IN ('reservation', 'extension', 'on_demand', 'refund')),
      amount_micros INTEGER NOT NULL,
      description TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );
    INSERT INTO charges_with_refunds (id, org_id, instance_id, kind, amount_micros, description, created_at)
      SELECT id, org_id, instance_id, kind, amount_micros, description, created_at FROM charges;
    DROP TABLE charges;
    ALTER TABLE charges_with_refunds RENAME TO charges;
    CREATE INDEX charges_org ON charges(org_id, created_at DESC, id DESC);
    CREATE INDEX charges_instance ON charges(instance_id);

    ALTER TABLE nodes ADD COLUMN forgotten_at INTEGER;
  `,
};
