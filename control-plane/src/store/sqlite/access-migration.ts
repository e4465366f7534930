// Schema for how users reach an instance: the SSH and Jupyter endpoints its node reported
// when it became ready (JSON: ssh, jupyter, jupyter_unavailable_reason).
import type { Migration } from './migrations.js';

export const ACCESS_MIGRATION: Migration = {
  version: 5,
  name: 'instance access: SSH and Jupyter endpoints reported by the node',
  sql: `
    ALTER TABLE instances ADD COLUMN access TEXT;
  `,
};
