// The key exchanges and compression the SSH gateway offers, asked for by the real OpenSSH
// client and by ssh2's: the expensive finite-field groups and NIST P-384/P-521, which
// anyone may pick before logging in, are refused, and so is compression (a packet of
// zeros inflates a thousandfold on the gateway's thread); what OpenSSH, PuTTY and FIPS-mode
// clients use, `ssh -C` included, gets as far as the login.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { AccessRegistry } from '../access/access-registry.js';
import { sshLimitsOf } from '../access/start-access.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { generateEd25519OpenSsh, hostKeyFrom } from './host-key.js';
import { SshGateway } from './ssh-gateway.js';

let gateway: SshGateway;
let port: number;

beforeAll(async () => {
  gateway = new SshGateway({
    registry: new AccessRegistry(),
    docker: new Docker(),
    hostKey: hostKeyFrom(generateEd25519OpenSsh().privateKey, 'test'),
    log: createLogger('silent', 'ssh-gateway-test'),
    host: '127.0.0.1',
    port: 0,
    // Every refused exchange is a connection without a login: no penalty gets in the way here.
    limits: { ...sshLimitsOf(loadAgentConfig({})), penalties: null },
  });
  port = await gateway.listen();
});

afterAll(async () => {
  await gateway?.close();
});

/** What OpenSSH says when it offers only `kex` (and what `options` add). */
async function offering(kex: string, options: string[] = []): Promise<string> {
  const args = ['-p', String(port), '-o', `KexAlgorithms=${kex}`, ...options, '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'ConnectTimeout=10', 'inst_none@127.0.0.1', 'true'];
  const result = await promisify(execFile)('ssh', args, { timeout: 20_000 }).catch((err: { stderr?: string }) => ({ stderr: err.stderr ?? '' }));
  return result.stderr;
}

describe('SSH gateway key exchanges and compression', () => {
  it.each(['diffie-hellman-group18-sha512', 'diffie-hellman-group16-sha512', 'ecdh-sha2-nistp521', 'ecdh-sha2-nistp384', 'diffie-hellman-group-exchange-sha256'])('refuses %s', async (kex) => {
    expect(await offering(kex)).toMatch(/no matching key exchange method found/);
  });

  it.each(['curve25519-sha256', 'curve25519-sha256@libssh.org', 'ecdh-sha2-nistp256', 'diffie-hellman-group14-sha256'])('takes %s as far as the login', async (kex) => {
    expect(await offering(kex)).toMatch(/Permission denied \(publickey\)/);
  });

  it('takes `ssh -C` as far as the login, without compression', async () => {
    expect(await offering('curve25519-sha256', ['-C'])).toMatch(/Permission denied \(publickey\)/);
  });

  it('refuses a client that will only compress', async () => {
    const client = new ssh2.Client();
    const failed = new Promise<Error>((resolve) => client.on('error', resolve));
    client.connect({ host: '127.0.0.1', port, username: 'inst_none', algorithms: { compress: ['zlib'] }, readyTimeout: 10_000 });
    expect((await failed).message).toMatch(/no matching C->S compression/i);
    client.end();
  });
});
