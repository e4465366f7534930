import { describe, expect, it } from 'vitest';
import { redactSecrets } from './redact-secrets.js';

describe('redactSecrets', () => {
  const cases: Array<[string, string, string[], string]> = [
    ['a key value', '{"key_id":"key_1","key":"svc_sk_live_abc"}', ['key'], '{"key_id":"key_1","key":null,"key_redacted":true}'],
    ['a webhook secret', '{"id":"wh_1","secret":"whsec_x","old_secret_expires_at":"t"}', ['secret'], '{"id":"wh_1","secret":null,"old_secret_expires_at":"t","secret_redacted":true}'],
    ['no fields named', '{"key":"svc_sk_live_abc"}', [], '{"key":"svc_sk_live_abc"}'],
    ['an error answer (no such field)', '{"error":{"type":"not_found","message":"no key"}}', ['key'], '{"error":{"type":"not_found","message":"no key"}}'],
    ['a null field', '{"key":null}', ['key'], '{"key":null}'],
    ['not JSON', 'plain', ['key'], 'plain'],
    ['a JSON array', '[{"key":"v"}]', ['key'], '[{"key":"v"}]'],
  ];
  it.each(cases)('%s', (_name, body, fields, expected) => {
    expect(redactSecrets(body, fields)).toBe(expected);
  });
});
