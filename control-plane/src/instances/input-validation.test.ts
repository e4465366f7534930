import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { imageReferenceProblem, labelProblem, sshPublicKeyProblem } from './input-validation.js';

describe('imageReferenceProblem', () => {
  it.each([
    'busybox',
    'library/busybox:1.36',
    '127.0.0.1:5000/svc/busybox:1',
    'nvidia/cuda:12.8.1-base-ubuntu24.04',
    'ghcr.io/org/team/image@sha256:' + 'a'.repeat(64),
    'registry.example.com:443/a/b:v1@sha256:' + 'b'.repeat(64),
    'localhost/x',
  ])('accepts %s', (ref) => expect(imageReferenceProblem(ref)).toBeUndefined());

  it.each(['', 'UPPER/case', 'a b', 'image:', 'image:-bad', 'image@sha256:short', '/leading', 'x'.repeat(600), 'a//b'])(
    'refuses %s',
    (ref) => expect(imageReferenceProblem(ref)).toBeDefined(),
  );

  // Docker reads these as a local image's ID, whatever repository it came from.
  it.each(['sha256:' + 'c'.repeat(64), 'sha256:cd6c', 'c'.repeat(64)])('refuses the image ID %s', (ref) =>
    expect(imageReferenceProblem(ref)).toMatch(/names an image by its ID/),
  );
});

/** An OpenSSH public key line built from a real key pair (JWK -> SSH wire format). */
function opensshLine(type: 'ed25519' | 'rsa', bits = 2048): string {
  const field = (b: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.length);
    return Buffer.concat([len, b]);
  };
  if (type === 'ed25519') {
    const { publicKey } = generateKeyPairSync('ed25519');
    const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
    return `ssh-ed25519 ${Buffer.concat([field(Buffer.from('ssh-ed25519')), field(raw)]).toString('base64')} me@laptop`;
  }
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  const jwk = publicKey.export({ format: 'jwk' });
  const mpint = (b64: string) => {
    const b = Buffer.from(b64, 'base64url');
    return b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b;
  };
  const blob = Buffer.concat([field(Buffer.from('ssh-rsa')), field(mpint(jwk.e!)), field(mpint(jwk.n!))]);
  return `ssh-rsa ${blob.toString('base64')}`;
}

describe('sshPublicKeyProblem', () => {
  it('accepts real ed25519 and RSA keys', () => {
    expect(sshPublicKeyProblem(opensshLine('ed25519'))).toBeUndefined();
    expect(sshPublicKeyProblem(opensshLine('rsa', 2048))).toBeUndefined();
  });

  it('refuses short RSA keys, mismatched blobs, junk and unknown types', () => {
    expect(sshPublicKeyProblem(opensshLine('rsa', 1024))).toMatch(/at least 2048 bits/);
    // A key anyone can make up (no private key needed to send it signatures), each costing milliseconds to check.
    const field = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, b.length >> 8, b.length & 0xff]), b]);
    const costly = Buffer.concat([field(Buffer.from('ssh-rsa')), field(Buffer.alloc(384, 0x5b)), field(Buffer.alloc(384, 0x5b))]);
    expect(sshPublicKeyProblem(`ssh-rsa ${costly.toString('base64')}`)).toMatch(/public exponent must be odd, at least 3 and at most 32 bits .*this one has 3071 bits$/);
    const ed = opensshLine('ed25519').split(' ')[1]!;
    expect(sshPublicKeyProblem(`ssh-rsa ${ed}`)).toMatch(/does not hold a ssh-rsa key/);
    expect(sshPublicKeyProblem('ssh-ed25519 !!!')).toMatch(/base64/);
    expect(sshPublicKeyProblem('ssh-dss AAAA')).toMatch(/unsupported key type/);
    expect(sshPublicKeyProblem('just-one-word')).toBeDefined();
  });
});

describe('labelProblem', () => {
  it('accepts tidy labels and refuses bad keys, long values and too many', () => {
    expect(labelProblem({ team: 'ml', 'cost-center': '42', 'app.kubernetes.io/name': 'x' })).toBeUndefined();
    expect(labelProblem({ '': 'x' })?.[0]).toBe('labels.');
    expect(labelProblem({ 'bad key': 'x' })?.[0]).toBe('labels.bad key');
    expect(labelProblem({ k: 'v'.repeat(257) })?.[1]).toMatch(/256/);
    expect(labelProblem(Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])))?.[0]).toBe('labels');
  });

  it.each(['a\u0000b', 'tab\there', '\u001b[2J', '\u009b', '\ud800x', 'x\udc00'])('refuses the value %j (control characters, half a surrogate pair)', (value) => {
    expect(labelProblem({ team: value })).toEqual(['labels.team', 'label values may not hold control characters or unpaired UTF-16 surrogates']);
  });

  it.each(['ml-team', 'équipe', '研究', '🚀 launch'])('accepts the value %j', (value) => expect(labelProblem({ team: value })).toBeUndefined());
});
