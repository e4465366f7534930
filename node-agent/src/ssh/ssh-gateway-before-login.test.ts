// What anyone who reaches the SSH gateway can make it do before logging in, asked by the
// real OpenSSH client and by ssh2's: the expensive finite-field groups and NIST
// P-384/P-521 are refused, and so is compression (a packet of zeros inflates a
// thousandfold on the gateway's thread); what OpenSSH, PuTTY and FIPS-mode clients use,
// `ssh -C` included, gets as far as the login; and a client that sends more than a login
// takes is cut off.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRE_LOGIN_BYTES, type SshGateway } from './ssh-gateway.js';
import { startTestGateway } from './test-gateway.js';

// ssh2 has no call that sends SSH_MSG_IGNORE with a payload of one's choosing; its own packet writer does.
const { sendPacket } = createRequire(import.meta.url)('ssh2/lib/protocol/utils.js') as { sendPacket(protocol: unknown, packet: Buffer): void };

let gateway: SshGateway;
let port: number;

beforeAll(async () => {
  ({ gateway, port } = await startTestGateway());
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

describe('SSH gateway before a login', () => {
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

  it('cuts off a client that sends more than a login takes before logging in', async () => {
    // SSH_MSG_IGNORE packets, which any client may send at any time, sent after the key
    // exchange while the client holds off its login: each one the gateway must decrypt.
    const client = new ssh2.Client();
    let sent = 0;
    const ended = new Promise<void>((resolve) => client.on('close', () => resolve()));
    client.on('error', () => undefined);
    client.on('handshake', () => {
      const protocol = (client as unknown as { _protocol: { _packetRW: { write: { allocStart: number; alloc(n: number): Buffer; finalize(p: Buffer): Buffer } } } })._protocol;
      const socket = (client as unknown as { _sock: { writableLength: number; destroyed: boolean; once(e: string, f: () => void): void } })._sock;
      const data = Buffer.alloc(32_000);
      const pump = (): void => {
        while (!socket.destroyed && sent < 256 * 1024 ** 2) {
          const at = protocol._packetRW.write.allocStart;
          const packet = protocol._packetRW.write.alloc(1 + 4 + data.length);
          packet[at] = 2; // SSH_MSG_IGNORE
          packet.writeUInt32BE(data.length, at + 1);
          packet.set(data, at + 5);
          sendPacket(protocol, protocol._packetRW.write.finalize(packet));
          sent += data.length;
          if (socket.writableLength > 1024 ** 2) return socket.once('drain', pump);
        }
      };
      pump();
    });
    // The login never comes: the client waits until the gateway closes the connection.
    client.connect({ host: '127.0.0.1', port, username: 'inst_none', authHandler: () => undefined, readyTimeout: 30_000 } as unknown as ssh2.ConnectConfig);
    const closed = await Promise.race([ended.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 10_000))]);
    client.end();
    // What the gateway took, and what was in flight in the sockets' buffers when it closed.
    expect({ closed, sentMoreThanTheLimit: sent > PRE_LOGIN_BYTES, sentMiB: Math.min(Math.round(sent / 1024 ** 2), 16) }).toEqual({ closed: true, sentMoreThanTheLimit: true, sentMiB: expect.any(Number) });
    expect(sent).toBeLessThan(16 * 1024 ** 2);
  }, 30_000);
});
