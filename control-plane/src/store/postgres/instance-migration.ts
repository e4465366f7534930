// Schema for instances, their transitions and the charges ledger (SQLite migrations 4,
// 5 and 12's refund lines). Money is integer micro-dollars. `charges.ord` keeps
// insertion order, which SQLite reads from its rowid.
import { TEXT } from './schema-text.js';

export const INSTANCE_SCHEMA = `
  CREATE TABLE instances (
    id ${TEXT} PRIMARY KEY,
    org_id ${TEXT} NOT NULL,
    key_id ${TEXT},
    status ${TEXT} NOT NULL,
    failure_reason ${TEXT},
    sku ${TEXT} NOT NULL,
    gpus INTEGER NOT NULL,
    pool ${TEXT} NOT NULL,
    mode ${TEXT} NOT NULL CHECK (mode IN ('on_demand', 'reserved')),
    duration_hours DOUBLE PRECISION,
    image ${TEXT} NOT NULL,
    ssh_keys ${TEXT} NOT NULL,
    labels ${TEXT} NOT NULL,
    node_id ${TEXT},
    gpu_uuids ${TEXT} NOT NULL,
    rate_micros BIGINT NOT NULL,
    progress ${TEXT},
    created_at BIGINT NOT NULL,
    ready_at BIGINT,
    expires_at BIGINT,
    terminated_at BIGINT,
    pending_stop ${TEXT},
    access ${TEXT},
    updated_at BIGINT NOT NULL
  );
  CREATE INDEX instances_org ON instances(org_id, created_at DESC, id DESC);
  CREATE INDEX instances_node ON instances(node_id, status);

  CREATE TABLE instance_transitions (
    instance_id ${TEXT} NOT NULL,
    at BIGINT NOT NULL,
    from_status ${TEXT} NOT NULL,
    to_status ${TEXT} NOT NULL,
    reason ${TEXT}
  );
  CREATE INDEX instance_transitions_instance ON instance_transitions(instance_id, at);

  CREATE TABLE charges (
    ord BIGSERIAL UNIQUE,
    id ${TEXT} PRIMARY KEY,
    org_id ${TEXT} NOT NULL,
    instance_id ${TEXT} NOT NULL,
    kind ${TEXT} NOT NULL CHECK (kind IN ('reservation', 'extension', 'on_demand', 'refund')),
    amount_micros BIGINT NOT NULL,
    description ${TEXT} NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX charges_org ON charges(org_id, created_at DESC, id DESC);
  CREATE INDEX charges_instance ON charges(instance_id);
`;
