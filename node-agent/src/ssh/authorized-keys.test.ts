import { describe, expect, it } from 'vitest';
import ssh2 from 'ssh2';
import { parseAuthorizedKeys, publicKeyAccepted } from './authorized-keys.js';
import { fingerprintOf, generateEd25519OpenSsh } from './host-key.js';

const ed25519 = (): { private: string; public: string } => {
  const { privateKey, publicBlob } = generateEd25519OpenSsh();
  return { private: privateKey, public: `ssh-ed25519 ${publicBlob.toString('base64')}` };
};

const pair = (type: 'ed25519' | 'ecdsa' | 'rsa') => {
  // ed25519 through node:crypto: ssh2's generator writes an unreadable key 1 time in 256.
  const generated = type === 'ed25519' ? ed25519() : type === 'ecdsa' ? ssh2.utils.generateKeyPairSync('ecdsa', { bits: 256 }) : ssh2.utils.generateKeyPairSync('rsa', { bits: 2048 });
  const priv = ssh2.utils.parseKey(generated.private);
  if (priv instanceof Error) throw priv;
  return { line: `${generated.public} user@laptop`, priv };
};

describe('authorized keys', () => {
  const ed = pair('ed25519');
  const ec = pair('ecdsa');
  const rsa = pair('rsa');
  const other = pair('ed25519');
  const { keys, unusable } = parseAuthorizedKeys([ed.line, ec.line, rsa.line, '', 'sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t x']);

  it('reads ed25519, ECDSA and RSA lines and says which cannot be used', () => {
    expect(keys.map((k) => k.type)).toEqual(['ssh-ed25519', 'ecdsa-sha2-nistp256', 'ssh-rsa']);
    expect(unusable).toHaveLength(1);
    expect(unusable[0]).toMatch(/^sk-ssh-ed25519@openssh.com: /);
  });

  it.each([
    ['ed25519', ed, undefined],
    ['ECDSA', ec, undefined],
    ['RSA with rsa-sha2-512', rsa, 'sha512'],
  ])('accepts a valid %s signature and refuses a forged one', (_name, k, hashAlgo) => {
    const blob = k.priv.getPublicSSH();
    const data = Buffer.from('session id and userauth request');
    expect(publicKeyAccepted(keys, { blob })).toBeDefined();
    const signature = k.priv.sign(data, hashAlgo);
    expect(publicKeyAccepted(keys, { blob, signature, signedData: data, hashAlgo })?.fingerprint).toBe(fingerprintOf(blob));
    expect(publicKeyAccepted(keys, { blob, signature, signedData: Buffer.from('something else'), hashAlgo })).toBeUndefined();
  });

  it("refuses an RSA key's SHA-1 signature (ssh-rsa), valid as it is: only rsa-sha2-256/512 log in", () => {
    const blob = rsa.priv.getPublicSSH();
    const data = Buffer.from('session id and userauth request');
    expect(publicKeyAccepted(keys, { blob, signature: rsa.priv.sign(data), signedData: data })).toBeUndefined();
    expect(publicKeyAccepted(keys, { blob, signature: rsa.priv.sign(data, 'sha1'), signedData: data, hashAlgo: 'sha1' })).toBeUndefined();
    expect(publicKeyAccepted(keys, { blob, signature: rsa.priv.sign(data, 'sha256'), signedData: data, hashAlgo: 'sha256' })).toBeDefined();
  });

  it('refuses a key that is not authorized, even with a valid signature of its own', () => {
    const blob = other.priv.getPublicSSH();
    const data = Buffer.from('x');
    expect(publicKeyAccepted(keys, { blob })).toBeUndefined();
    expect(publicKeyAccepted(keys, { blob, signature: other.priv.sign(data), signedData: data })).toBeUndefined();
  });

  it('leaves out an RSA key whose exponent would make each signature cost the gateway milliseconds, so no signature is ever checked with it', () => {
    // Any numbers will do: whoever sends signatures for it needs no private key.
    const field = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, b.length >> 8, b.length & 0xff]), b]);
    const big = (bytes: number) => Buffer.concat([Buffer.from([0, 0xc3]), Buffer.alloc(bytes - 2, 0x5b), Buffer.from([0x01])]);
    const blob = Buffer.concat([field(Buffer.from('ssh-rsa')), field(big(384)), field(big(384))]);
    const parsed = parseAuthorizedKeys([ed.line, `ssh-rsa ${blob.toString('base64')} costly`]);
    expect(parsed.keys.map((k) => k.type)).toEqual(['ssh-ed25519']);
    expect(parsed.unusable).toEqual([expect.stringMatching(/^ssh-rsa: an RSA key's public exponent must be odd, at least 3 and at most 32 bits .*this one has \d+ bits$/)]);
    const data = Buffer.from('session id and userauth request');
    expect(publicKeyAccepted(parsed.keys, { blob })).toBeUndefined();
    expect(publicKeyAccepted(parsed.keys, { blob, signature: Buffer.alloc(384, 1), signedData: data, hashAlgo: 'sha256' })).toBeUndefined();
  });
});
