import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import ssh2 from 'ssh2';
import { afterAll, describe, expect, it } from 'vitest';
import { fingerprintOf, generateEd25519OpenSsh, hostKeyPath, loadOrCreateHostKey } from './host-key.js';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'host-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('host keys made with node:crypto', () => {
  it('every one of 2,000 keys reads back with ssh2 as the key that was made, and signs', () => {
    const data = Buffer.from('session id');
    for (let i = 0; i < 2_000; i++) {
      const { privateKey, publicBlob } = generateEd25519OpenSsh();
      const parsed = ssh2.utils.parseKey(privateKey);
      if (parsed instanceof Error) throw new Error(`key ${i} does not parse: ${parsed.message}\n${privateKey}`);
      expect(parsed.isPrivateKey()).toBe(true);
      expect(parsed.getPublicSSH().equals(publicBlob)).toBe(true);
      if (i % 100 === 0) expect(parsed.verify(data, parsed.sign(data) as Buffer)).toBe(true);
    }
  });

  it('ssh-keygen reads a sample of them and prints the same public key and fingerprint', async () => {
    for (let i = 0; i < 25; i++) {
      const { privateKey, publicBlob } = generateEd25519OpenSsh(`sample-${i}`);
      const path = join(dir, `sample-${i}`);
      writeFileSync(path, privateKey, { mode: 0o600 });
      const { stdout } = await run('ssh-keygen', ['-y', '-f', path]);
      expect(stdout.trim().split(' ').slice(0, 2).join(' ')).toBe(`ssh-ed25519 ${publicBlob.toString('base64')}`);
      const listed = await run('ssh-keygen', ['-l', '-f', path]);
      expect(listed.stdout).toContain(fingerprintOf(publicBlob));
    }
  });

  it('is created once with mode 0600, and the same key is read on the next start', async () => {
    const data = join(dir, 'node-a');
    const first = await loadOrCreateHostKey(data);
    expect(first.created).toBe(true);
    expect(statSync(hostKeyPath(data)).mode & 0o777).toBe(0o600);
    const second = await loadOrCreateHostKey(data);
    expect({ created: second.created, fingerprint: second.fingerprint }).toEqual({ created: false, fingerprint: first.fingerprint });
    const { stdout } = await run('ssh-keygen', ['-l', '-f', hostKeyPath(data)]);
    expect(stdout).toContain(first.fingerprint);
  });

  it('replaces a stored key that cannot be read, keeping it aside and saying so', async () => {
    const data = join(dir, 'node-b');
    const first = await loadOrCreateHostKey(data);
    // What ssh2's generator wrote now and then: an OpenSSH key with a byte missing.
    const broken = readFileSync(hostKeyPath(data), 'utf8').replace(/\n[A-Za-z0-9+/]{4}/, '\n');
    writeFileSync(hostKeyPath(data), broken, { mode: 0o600 });
    const warnings: string[] = [];
    const replaced = await loadOrCreateHostKey(data, (message) => warnings.push(message));
    expect(replaced.created).toBe(true);
    expect(replaced.fingerprint).not.toBe(first.fingerprint);
    expect(warnings).toEqual([expect.stringMatching(/cannot be read/)]);
    expect(readdirSync(data).filter((f) => f.includes('.unreadable-'))).toHaveLength(1);
    expect((await loadOrCreateHostKey(data)).fingerprint).toBe(replaced.fingerprint);
  });
});
