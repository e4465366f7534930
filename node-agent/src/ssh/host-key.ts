// The SSH gateway's host key: one ed25519 key per node, generated on the first start and
// kept in the agent's data dir (ssh-host-ed25519.key, mode 0600), so users' known_hosts
// entries stay valid across agent restarts and upgrades. Its fingerprint goes to the
// control plane, which shows it in instance reads.
import { createHash } from 'node:crypto';
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
  const parsed = utils.parseKey(privateKey);
  if (parsed instanceof Error || !parsed.isPrivateKey()) {
    throw new HostKeyError(`${source} is not a private SSH key${parsed instanceof Error ? `: ${parsed.message}` : ''}; remove it and the agent makes a new one`);
  }
  const blob = parsed.getPublicSSH();
  return { privateKey, publicKey: `${parsed.type} ${blob.toString('base64')}`, fingerprint: fingerprintOf(blob) };
}

/** The node's host key, created (atomically, 0600) when the data dir has none yet. */
export async function loadOrCreateHostKey(dataDir: string): Promise<HostKey & { created: boolean }> {
  const path = hostKeyPath(dataDir);
  try {
    return { ...hostKeyFrom(await readFile(path, 'utf8'), path), created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const { private: privateKey } = utils.generateKeyPairSync('ed25519');
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, privateKey, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, path);
  return { ...hostKeyFrom(privateKey, path), created: true };
}
