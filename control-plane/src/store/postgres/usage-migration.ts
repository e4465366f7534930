// Schema for inference usage records and the sandbox keys' daily token counters
// (SQLite migration 7). Cost is integer nano-dollars. "user" is a reserved word here.
import { TEXT } from './schema-text.js';

export const USAGE_SCHEMA = `
  CREATE TABLE usage_records (
    id ${TEXT} PRIMARY KEY,
    org_id ${TEXT} NOT NULL,
    key_id ${TEXT} NOT NULL,
    request_id ${TEXT} NOT NULL,
    kind ${TEXT} NOT NULL CHECK (kind IN ('chat', 'embeddings')),
    model ${TEXT} NOT NULL,
    quantization ${TEXT} NOT NULL,
    pool ${TEXT} NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cost_nanos BIGINT NOT NULL,
    "user" ${TEXT},
    sandbox BOOLEAN NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX usage_records_org ON usage_records(org_id, created_at, id);

  CREATE TABLE sandbox_tokens (
    key_id ${TEXT} NOT NULL,
    day ${TEXT} NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (key_id, day)
  );
`;
