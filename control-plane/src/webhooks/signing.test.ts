import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { SECRET_PREFIX, generateSecret, secretKeyBytes, signatureFor, signedHeaders } from './signing.js';

describe('webhook secrets', () => {
  it('are whsec_ + base64 of 32 random bytes, different each time', () => {
    const a = generateSecret();
    expect(a.startsWith(SECRET_PREFIX)).toBe(true);
    expect(secretKeyBytes(a)).toHaveLength(32);
    expect(generateSecret()).not.toBe(a);
  });

  it('refuse a value without the prefix', () => {
    expect(() => secretKeyBytes('c2VjcmV0')).toThrow(/whsec_/);
  });
});

describe('signatures', () => {
  // The example of the Standard Webhooks specification.
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
  const timestamp = 1614265330;
  const body = '{"test": 2432232314}';

  it('match the specification example', () => {
    expect(signatureFor(secret, id, timestamp, body)).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('verify with the standardwebhooks library, with every secret that signed', () => {
    const now = Math.floor(Date.now() / 1000);
    const [oldSecret, newSecret] = [generateSecret(), generateSecret()];
    const headers = signedHeaders([newSecret, oldSecret], 'evt_1', now, body);
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(oldSecret).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(new Webhook(newSecret).verify(body, { ...headers })).toEqual(JSON.parse(body));
    expect(() => new Webhook(generateSecret()).verify(body, { ...headers })).toThrow();
  });

  it('cover the body: a changed body does not verify', () => {
    const now = Math.floor(Date.now() / 1000);
    const s = generateSecret();
    const headers = signedHeaders([s], 'evt_1', now, body);
    expect(() => new Webhook(s).verify('{"test": 1}', { ...headers })).toThrow();
  });

  it('need at least one secret', () => {
    expect(() => signedHeaders([], 'evt_1', timestamp, body)).toThrow(/no active signing secret/);
  });
});
