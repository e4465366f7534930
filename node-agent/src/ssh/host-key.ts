// The SSH gateway's host key: one ed25519 key per node, generated on the first start and
// kept in the agent's data dir (ssh-host-ed25519.key, mode 0600), so users' known_hosts
// entries stay valid across agent restarts and upgrades. Its fingerprint goes to the
// control plane, which shows it in instance reads.
//
// Keys are made with node:crypto and written in OpenSSH's format here: ssh2's own
// generator drops a leading zero byte now and then (about 1 key in 256), writing a key
// that neither ssh2 nor `ssh-keygen -y` can read. Every key is read back with ssh2's
// parser and checked against the public key node:crypto made before it is used.
import { createHash, createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';

// ssh2 is CommonJS: its named exports are reached through the default import.
const { utils } = ssh2;

export interface HostKey {
  /** OpenSSH-format private key, for ssh2's `hostKeys`. */
  privateKey: string;
  /** The public key as a known_hosts / authorized_keys entry: `ssh-ed25519 AAAA...`. */
  publicKey: string;
  /** `SHA256:...`, as `ssh-keygen -l` and the OpenSSH client print it. */
  fingerprint: string;
}

export class HostKeyError extends Error {
  override readonly name = 'HostKeyError';
}

export const hostKeyPath = (dataDir: string): string => join(dataDir, 'ssh-host-ed25519.key');

/** OpenSSH's SHA256 fingerprint of a public key blob: unpadded base64 of its SHA-256. */
export function fingerprintOf(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

export function hostKeyFrom(privateKey: string, source: string): HostKey {
  let parsed: ReturnType<typeof utils.parseKey>;
  try {
    parsed = utils.parseKey(privateKey);
  } catch (err) {
    parsed = err as Error;
  }
  if (parsed instanceof Error || !parsed.isPrivateKey()) {
    throw new HostKeyError(`${source} is not a private SSH key${parsed instanceof Error ? `: ${parsed.message}` : ''}`);
  }
  const blob = parsed.getPublicSSH();
  return { privateKey, publicKey: `${parsed.type} ${blob.toString('base64')}`, fingerprint: fingerprintOf(blob) };
}

/** An SSH wire string: uint32 length, then the bytes. */
function sshString(data: Buffer | string): Buffer {
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

/** An Ed25519 private key in PKCS#8 DER (RFC 8410) is this prefix and then its 32-byte seed. */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * An ed25519 key pair from node:crypto, as an unencrypted `openssh-key-v1` private key
 * (PROTOCOL.key in OpenSSH's source). The seed is 32 random bytes; node:crypto derives the
 * public key, taken from the fixed-length end of its SPKI DER.
 */
export function generateEd25519OpenSsh(comment = 'svc-node-agent'): { privateKey: string; publicBlob: Buffer } {
  // From a random seed, not generateKeyPairSync: on Node 20 the key-generation job it
  // leaves behind can be collected while its key is being exported, and its destructor
  // then waits on the lock that export holds (a deadlock seen in the 2,000-key test).
  const seed = randomBytes(32);
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const pub = createPublicKey(privateKey).export({ format: 'der', type: 'spki' }).subarray(-32);
  if (pub.length !== 32) throw new HostKeyError(`node:crypto gave an ed25519 public key of ${pub.length} bytes`);
  const publicBlob = Buffer.concat([sshString('ssh-ed25519'), sshString(pub)]);
  const check = randomBytes(4);
  let secret = Buffer.concat([check, check, sshString('ssh-ed25519'), sshString(pub), sshString(Buffer.concat([seed, pub])), sshString(comment)]);
  // Padded with 1, 2, 3, … to the cipher's block size (8 for "none").
  const padding = (8 - (secret.length % 8)) % 8;
  secret = Buffer.concat([secret, Buffer.from(Array.from({ length: padding }, (_, i) => i + 1))]);
  const count = Buffer.alloc(4);
  count.writeUInt32BE(1);
  const body = Buffer.concat([Buffer.from('openssh-key-v1\0'), sshString('none'), sshString('none'), sshString(''), count, sshString(publicBlob), sshString(secret)]);
  const lines = body.toString('base64').match(/.{1,70}/g)!;
  return { privateKey: `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines.join('\n')}\n-----END OPENSSH PRIVATE KEY-----\n`, publicBlob };
}

/** A new host key, read back with ssh2's parser and checked before it is used. */
export function newHostKey(): HostKey {
  for (let attempt = 1; ; attempt++) {
    const { privateKey, publicBlob } = generateEd25519OpenSsh();
    try {
      const key = hostKeyFrom(privateKey, 'the new host key');
      if (key.fingerprint === fingerprintOf(publicBlob)) return key;
      throw new HostKeyError('the new host key reads back as another key');
    } catch (err) {
      if (attempt >= 3) throw err;
    }
  }
}

/**
 * The node's host key, created (atomically, 0600) when the data dir has none yet. A
 * stored key that cannot be read is set aside (`….unreadable-<time>`) and replaced, with
 * a warning: the agent could never have served it, so no client knows it.
 */
export async function loadOrCreateHostKey(dataDir: string, warn: (message: string, fields: Record<string, unknown>) => void = () => undefined): Promise<HostKey & { created: boolean }> {
  const path = hostKeyPath(dataDir);
  try {
    return { ...hostKeyFrom(await readFile(path, 'utf8'), path), created: false };
  } catch (err) {
    if (err instanceof HostKeyError) {
      const aside = `${path}.unreadable-${Date.now()}`;
      await rename(path, aside);
      warn('the stored SSH host key cannot be read; made a new one', { unreadable: aside, reason: err.message });
    } else if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw err;
    }
  }
  const { privateKey } = newHostKey();
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, privateKey, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, path);
  return { ...hostKeyFrom(privateKey, path), created: true };
}
