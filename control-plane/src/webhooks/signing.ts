// Signing secrets and signatures per Standard Webhooks (https://www.standardwebhooks.com):
// the secret is "whsec_" + base64 of random bytes; a signature is
// "v1," + base64(HMAC-SHA256(secret bytes, "<id>.<timestamp>.<body>")).
import { createHmac, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';
/** Standard Webhooks asks for 24 to 64 bytes; 32 matches the HMAC-SHA256 block strength. */
export const SECRET_BYTES = 32;

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/** The HMAC key: the bytes the base64 after "whsec_" stands for. */
export function secretKeyBytes(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('a webhook secret starts with whsec_');
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
}

export function signatureFor(secret: string, messageId: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secretKeyBytes(secret)).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

export interface SignedHeaders {
  'content-type': 'application/json';
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The headers of one delivery attempt. Every active secret signs (newest first), so a
 * receiver still holding the old secret during a rotation overlap verifies too: the
 * header carries space-separated `v1,<sig>` entries, as the convention allows.
 */
export function signedHeaders(secrets: readonly string[], messageId: string, timestampSeconds: number, body: string): SignedHeaders {
  if (secrets.length === 0) throw new Error(`no active signing secret for message ${messageId}`);
  return {
    'content-type': 'application/json',
    'webhook-id': messageId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': secrets.map((s) => signatureFor(s, messageId, timestampSeconds, body)).join(' '),
  };
}
