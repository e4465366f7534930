// The public keys that may open an instance: the `ssh_keys` given at create time, one
// OpenSSH line each (`ssh-ed25519 AAAA... comment`). A presented key matches when its
// wire blob equals an authorized one's; the signature is checked with that key.
import { timingSafeEqual } from 'node:crypto';
import { rsaBlobProblem } from '@svc/shared/ssh-key';
import ssh2, { type ParsedKey } from 'ssh2';
import { fingerprintOf } from './host-key.js';

const { utils } = ssh2;

export interface AuthorizedKey {
  type: string;
  blob: Buffer;
  fingerprint: string;
  key: ParsedKey;
}

export interface ParsedAuthorizedKeys {
  keys: AuthorizedKey[];
  /** Lines that cannot authenticate here (e.g. FIDO `sk-` keys, which the gateway cannot verify), with why. */
  unusable: string[];
}

export function parseAuthorizedKeys(lines: readonly string[]): ParsedAuthorizedKeys {
  const keys: AuthorizedKey[] = [];
  const unusable: string[] = [];
  for (const line of lines) {
    const trimmed = line.trim();
    if (!trimmed) continue;
    const parsed = utils.parseKey(trimmed);
    const type = trimmed.split(/\s+/)[0]!;
    if (parsed instanceof Error) {
      unusable.push(`${type}: ${parsed.message}`);
      continue;
    }
    const blob = parsed.getPublicSSH();
    // A key the control plane would refuse now (given to an older one): checking its signatures could cost the gateway's thread milliseconds each.
    const problem = rsaBlobProblem(blob);
    if (problem) {
      unusable.push(`${type}: ${problem}`);
      continue;
    }
    keys.push({ type: parsed.type, blob, fingerprint: fingerprintOf(blob), key: parsed });
  }
  return { keys, unusable };
}

/** The authorized key whose blob is `blob` (what the client offers), or undefined. */
export function findAuthorizedKey(keys: readonly AuthorizedKey[], blob: Buffer): AuthorizedKey | undefined {
  return keys.find((k) => k.blob.length === blob.length && timingSafeEqual(k.blob, blob));
}

/**
 * Checks a publickey authentication attempt: the key must be authorized and, once the
 * client sends a signature, the signature must verify. `signature` undefined is the
 * client's query ("would this key do?"), answered by whether the key is authorized.
 */
export function publicKeyAccepted(
  keys: readonly AuthorizedKey[],
  attempt: { blob: Buffer; signature?: Buffer; signedData?: Buffer; hashAlgo?: string },
): AuthorizedKey | undefined {
  const key = findAuthorizedKey(keys, attempt.blob);
  if (!key) return undefined;
  if (attempt.signature === undefined) return key;
  if (!attempt.signedData) return undefined;
  // ssh2 verifies a plain `ssh-rsa` signature with SHA-1 (no hashAlgo): only rsa-sha2-256/512 count, as OpenSSH 8.8+ has it.
  if (key.type === 'ssh-rsa' && attempt.hashAlgo !== 'sha256' && attempt.hashAlgo !== 'sha512') return undefined;
  return key.key.verify(attempt.signedData, attempt.signature, attempt.hashAlgo) === true ? key : undefined;
}
