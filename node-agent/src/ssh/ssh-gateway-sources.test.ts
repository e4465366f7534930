// The SSH gateway's cap on connections per source, over real IPv6 sockets: a client with
// a /64 cannot open more by sending each connection from another of its addresses.
// Addresses from the documentation prefix (2001:db8::/32) are put on the loopback device
// for the test and taken off after it.
import { execFileSync } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { AccessRegistry } from '../access/access-registry.js';
import { sshLimitsOf } from '../access/start-access.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { generateEd25519OpenSsh, hostKeyFrom } from './host-key.js';
import { SshGateway } from './ssh-gateway.js';

const SAME_64 = ['2001:db8:5:9::a', '2001:db8:5:9::b', '2001:db8:5:9:ffff::c'];
const OTHER_64 = '2001:db8:5:a::a';
const ADDRESSES = [...SAME_64, OTHER_64];

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

let gateway: SshGateway;
let port: number;
const opened: Socket[] = [];

beforeAll(async () => {
  // nodad: usable at once, with no duplicate-address probe to wait out.
  for (const address of ADDRESSES) ip('-6', 'addr', 'replace', `${address}/128`, 'dev', 'lo', 'nodad');
  const limits = { ...sshLimitsOf(loadAgentConfig({})), maxConnectionsPerSource: 2 };
  gateway = new SshGateway({
    registry: new AccessRegistry(),
    docker: new Docker(),
    hostKey: hostKeyFrom(generateEd25519OpenSsh().privateKey, 'test'),
    log: createLogger('silent', 'ssh-gateway-test'),
    host: '::',
    port: 0,
    limits,
  });
  port = await gateway.listen();
});

afterAll(async () => {
  for (const socket of opened) socket.destroy();
  await gateway?.close();
  for (const address of ADDRESSES) {
    try {
      ip('-6', 'addr', 'del', `${address}/128`, 'dev', 'lo');
    } catch {
      // already gone
    }
  }
});

/** Connects from `localAddress`: the gateway's banner, or null when it closed the connection without one. */
function banner(localAddress: string): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: SAME_64[0], port, localAddress, family: 6 });
    opened.push(socket);
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n')) resolve(text.slice(0, text.indexOf('\r\n')));
    });
    socket.on('close', () => resolve(null));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? resolve(null) : reject(err)));
  });
}

describe('SSH gateway connections per source', () => {
  it('counts an IPv6 client by its /64: a third address of the same /64 is refused, another /64 is not', async () => {
    expect(await banner(SAME_64[0]!)).toBe('SSH-2.0-svc-gateway');
    expect(await banner(SAME_64[1]!)).toBe('SSH-2.0-svc-gateway');
    // Two connections held from 2001:db8:5:9::/64: the cap of 2 is reached, whatever the address.
    expect(await banner(SAME_64[2]!)).toBeNull();
    expect(await banner(OTHER_64)).toBe('SSH-2.0-svc-gateway');
  });
});
