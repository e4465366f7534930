// On-demand compute is billed in the period it runs (billing/accrual.ts): running
// instances are charged hourly and at each month's end, and their end charges only the
// rest. `billed_seconds` is how many of an instance's seconds since `ready` its on_demand
// lines cover; an accrual moves it forward with a compare-and-set in the transaction that
// writes the line, a termination reads and moves it in the transaction of its transition.
// Instances running when this is applied had nothing billed yet: 0 is right for them.
import type { Migration } from './migrations.js';

export const ACCRUAL_MIGRATION: Migration = {
  version: 22,
  name: 'on-demand accrual: instances.billed_seconds',
  sql: `ALTER TABLE instances ADD COLUMN billed_seconds INTEGER NOT NULL DEFAULT 0;`,
};
