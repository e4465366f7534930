// Version 19, the twin of SQLite's: what replicas must share beyond the rows they already do.
// - rate_limits: one GCRA row per key and limit (pipeline/gcra.ts has the math), updated by
//   one UPSERT per request. UNLOGGED: no WAL per request; after a server crash (or on a
//   standby) the table is empty, which only means every key starts with a full bucket.
// - Change notices: a row trigger NOTIFYs `svc_changes` with `kind:id` when a key, a key
//   value, an org or a replica changes, whoever wrote it (any replica, svcctl), so every
//   process evicts its key cache and refreshes its replica directory on commit.
import type { Migration } from './migrations.js';
import { TEXT } from './schema-text.js';

export const CHANGES_CHANNEL = 'svc_changes';

const notifyOn = (table: string, kind: string, column: string) => `
  CREATE TRIGGER ${table}_changed AFTER INSERT OR UPDATE OR DELETE ON ${table}
    FOR EACH ROW EXECUTE FUNCTION svc_notify_change('${kind}', '${column}');`;

export const SHARED_STATE_MIGRATION: Migration = {
  version: 19,
  name: 'shared rate-limit state and change notices',
  sql: `
    CREATE UNLOGGED TABLE rate_limits (
      key_id ${TEXT} NOT NULL,
      kind ${TEXT} NOT NULL CHECK (kind IN ('requests', 'tokens')),
      tat DOUBLE PRECISION NOT NULL,
      admitted BOOLEAN NOT NULL DEFAULT TRUE,
      PRIMARY KEY (key_id, kind)
    );
    CREATE FUNCTION svc_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      changed jsonb := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
    BEGIN
      PERFORM pg_notify('${CHANGES_CHANNEL}', TG_ARGV[0] || ':' || (changed ->> TG_ARGV[1]));
      RETURN NULL;
    END $$;
    ${notifyOn('api_keys', 'key', 'id')}
    ${notifyOn('api_key_secrets', 'key', 'key_id')}
    ${notifyOn('orgs', 'org', 'id')}
    ${notifyOn('replicas', 'replica', 'id')}
  `,
};
