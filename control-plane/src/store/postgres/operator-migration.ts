// Operator keys and the operator audit trail: the twin of SQLite migration 15.
import { TEXT } from './schema-text.js';

export const OPERATOR_SCHEMA = `
  CREATE TABLE operator_keys (
    id ${TEXT} PRIMARY KEY,
    name ${TEXT},
    scopes ${TEXT} NOT NULL,
    hash BYTEA NOT NULL UNIQUE,
    last4 ${TEXT} NOT NULL,
    created_at BIGINT NOT NULL,
    created_by ${TEXT} NOT NULL,
    revoked_at BIGINT
  );

  CREATE TABLE operator_audit (
    seq BIGSERIAL PRIMARY KEY,
    at BIGINT NOT NULL,
    actor ${TEXT} NOT NULL,
    action ${TEXT} NOT NULL,
    target ${TEXT},
    detail ${TEXT} NOT NULL
  );
`;
