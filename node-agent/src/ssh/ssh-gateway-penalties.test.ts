// Source penalties on the real gateway, over real sockets from different loopback
// addresses (each its own source), with the real OpenSSH client where a user would use
// it: a source whose connections keep ending without a login is refused before the key
// exchange, while other sources, users who log in and exempt addresses are not.
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { AccessRegistry } from '../access/access-registry.js';
import { sshLimitsOf } from '../access/start-access.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { parseAuthorizedKeys } from './authorized-keys.js';
import { generateEd25519OpenSsh, hostKeyFrom } from './host-key.js';
import { SshGateway } from './ssh-gateway.js';
import { KernelDropList } from '../access/kernel-drop.js';
import { buildFirewallRules, DEFAULT_BLOCKED_PORTS, parsePortRules, PENALIZED_LISTS } from '../runtime/firewall-rules.js';
import { installHostFirewall } from '../runtime/host-firewall.js';
import { TEST_MAX_CONNECTIONS } from '../../../test/support/node-agent-process.js';

const INSTANCE = 'inst_penalty1';
const dir = mkdtempSync(join(tmpdir(), 'ssh-penalties-'));
const registry = new AccessRegistry();
const gateways: SshGateway[] = [];

async function startGateway(env: Record<string, string>, more: { host?: string; kernelDrop?: KernelDropList } = {}): Promise<number> {
  const gateway = new SshGateway({
    registry,
    docker: new Docker(),
    hostKey: hostKeyFrom(generateEd25519OpenSsh().privateKey, 'test'),
    log: createLogger('silent', 'ssh-penalties-test'),
    host: more.host ?? '127.0.0.1',
    port: 0,
    limits: sshLimitsOf(loadAgentConfig(env)),
    ...(more.kernelDrop ? { kernelDrop: more.kernelDrop } : {}),
  });
  gateways.push(gateway);
  return gateway.listen();
}

let port: number;
/**
 * The default policy ten times over (10 s a connection, refused past 150 s): the same
 * count of connections before the refusal, with the real-time drain made ten times
 * smaller, so a loaded machine that takes seconds over them lets no more in.
 */
let scaledPort: number;

beforeAll(async () => {
  for (const name of ['user', 'stranger']) execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, name)]);
  registry.register({
    instanceId: INSTANCE,
    containerId: 'not-used-by-a-login',
    containerIp: null,
    keys: parseAuthorizedKeys([readFileSync(join(dir, 'user.pub'), 'utf8')]).keys,
    home: '/root',
    jupyterToken: 'unused',
    jupyter: null,
    jupyterUnavailableReason: null,
    networkMbps: null,
  });
  // The default policy (noauth and authfail 1 s, refused past 15 s), one address exempt.
  port = await startGateway({ SVC_SSH_PENALTY_EXEMPT: '127.0.0.7' });
  scaledPort = await startGateway({ SVC_SSH_SOURCE_PENALTIES: 'noauth:10s authfail:10s min:150s max:1h' });
});

afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Opens a connection from `from`, sends what a client sends to get the key exchange done
 * (whose server half costs the agent about 1 ms) and leaves. Resolves with whether the
 * gateway answered with its banner, or closed the connection without one.
 */
function exchangeAndLeave(from: string, gatewayPort = port, host = '127.0.0.1'): Promise<'served' | 'refused'> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    let served = false;
    client.on('handshake', () => {
      served = true;
      client.end();
    });
    client.on('close', () => resolve(served ? 'served' : 'refused'));
    client.on('error', (err: Error) => {
      // Closed before the key exchange: 'close' follows and says refused.
      if (served) reject(err);
    });
    client.connect({ host, port: gatewayPort, localAddress: from, username: 'nobody', hostVerifier: () => true, readyTimeout: 5_000 });
  });
}

/** The gateway's first line to a plain TCP connection from `from`, or null when it closed without one. */
function banner(from: string, gatewayPort = port): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: gatewayPort, localAddress: from });
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n')) {
        resolve(text.slice(0, text.indexOf('\r\n')));
        socket.destroy();
      }
    });
    socket.on('close', () => resolve(null));
    socket.on('error', () => resolve(null));
  });
}

/** Runs the real OpenSSH client as `user` with `key` from address `from`. */
async function openssh(from: string, key: string, user = INSTANCE, gatewayPort = port): Promise<{ code: number; stderr: string }> {
  const args = ['-F', 'none', '-i', join(dir, key), '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null'];
  args.push('-o', 'LogLevel=ERROR', '-o', 'ConnectTimeout=5', '-b', from, '-p', String(gatewayPort), `${user}@127.0.0.1`, 'true');
  try {
    await promisify(execFile)('ssh', args, { timeout: 10_000 });
    return { code: 0, stderr: '' };
  } catch (err) {
    const e = err as { code?: number; stderr?: string };
    return { code: e.code ?? -1, stderr: e.stderr ?? '' };
  }
}

/** Logs in as the instance's user with ssh2 and leaves at once. */
function logInAndLeave(from: string): Promise<boolean> {
  return new Promise((resolve) => {
    const client = new ssh2.Client();
    client.on('ready', () => {
      client.end();
      resolve(true);
    });
    client.on('error', () => resolve(false));
    client.connect({ host: '127.0.0.1', port, localAddress: from, username: INSTANCE, privateKey: readFileSync(join(dir, 'user')), hostVerifier: () => true });
  });
}

describe('SSH source penalties', () => {
  it('a source that keeps leaving after the key exchange is refused before it once its penalty passes the threshold; another source is not', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 30; i++) outcomes.push(await exchangeAndLeave('127.0.0.2', scaledPort));
    const served = outcomes.filter((o) => o === 'served').length;
    // 16 exceed the threshold (the drain meanwhile may let one more in).
    expect(served).toBeGreaterThanOrEqual(16);
    expect(served).toBeLessThanOrEqual(17);
    expect(outcomes.slice(served)).toEqual(new Array(30 - served).fill('refused'));
    // Refused before anything is said: no banner for a plain connection either.
    expect(await banner('127.0.0.2', scaledPort)).toBeNull();
    expect(await banner('127.0.0.3', scaledPort)).toBe('SSH-2.0-svc-gateway');
    expect(await exchangeAndLeave('127.0.0.3', scaledPort)).toBe('served');
  });

  it('OpenSSH with a key the instance does not know: denied 16 times or more, then the connection is closed before the key exchange', async () => {
    const results = [];
    for (let i = 0; i < 30; i++) {
      const result = await openssh('127.0.0.4', 'stranger', INSTANCE, scaledPort);
      results.push(result);
      if (!result.stderr.includes('Permission denied')) break;
    }
    const denied = results.slice(0, -1);
    for (const result of denied) expect(result).toMatchObject({ code: 255, stderr: expect.stringContaining('Permission denied (publickey)') });
    // Past the threshold from the 16th on (the drain meanwhile may let one more in).
    expect(denied.length).toBeGreaterThanOrEqual(16);
    expect(denied.length).toBeLessThanOrEqual(17);
    const refused = results.at(-1)!;
    expect(refused.code).toBe(255);
    expect(refused.stderr).toMatch(/kex_exchange_identification|Connection (closed|reset)/);
    // The instance's own user, from elsewhere, is not affected.
    expect(await logInAndLeave('127.0.0.5')).toBe(true);
  });

  it('users who log in are never penalized, however often they come and go', async () => {
    for (let i = 0; i < 30; i++) expect(await logInAndLeave('127.0.0.6')).toBe(true);
  });

  it('an exempt address is never refused', async () => {
    for (let i = 0; i < 30; i++) expect(await exchangeAndLeave('127.0.0.7')).toBe('served');
  });

  it('the penalty drains in real time: the source is admitted again once it has', async () => {
    // 2 s a connection, refused past 3 s, never more than 4 s: the second passes the
    // threshold however slowly they come (a slow machine may let a third or fourth in).
    const shortPort = await startGateway({ SVC_SSH_SOURCE_PENALTIES: 'noauth:2s min:3s max:4s' });
    let refusedAt = -1;
    for (let i = 0; i < 10 && refusedAt < 0; i++) if ((await exchangeAndLeave('127.0.0.8', shortPort)) === 'refused') refusedAt = i;
    expect(refusedAt).toBeGreaterThanOrEqual(2);
    expect(refusedAt).toBeLessThanOrEqual(4);
    expect(await banner('127.0.0.8', shortPort)).toBeNull();
    // At most max (4 s) later it is served again.
    await new Promise((r) => setTimeout(r, 4_100));
    expect(await exchangeAndLeave('127.0.0.8', shortPort)).toBe('served');
  });
});

describe('SSH source penalties, by IPv6 site', () => {
  // Addresses on loopback from several /64s of one /48 (one party with a tunnel broker's
  // /48 has 65,536 of them), one from another /48, and the gateway's own.
  const site = (n: number) => `2001:db8:a5:${n}::1`;
  const otherSite = '2001:db8:a6:1::1';
  const gatewayAddress = '2001:db8:ff::1';
  const addresses = [...Array.from({ length: 14 }, (_, i) => site(i + 1)), otherSite, gatewayAddress];
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
  let sitePort: number;

  beforeAll(async () => {
    for (const address of addresses) ip('-6', 'addr', 'replace', `${address}/128`, 'dev', 'lo', 'nodad');
    // Each connection that leaves adds 20 s; a network is refused past 30 s, its site
    // past 120 s (SITE_SHARE = 4), which drains 4 s a second.
    sitePort = await startGateway({ SVC_SSH_SOURCE_PENALTIES: 'noauth:20s authfail:20s min:30s max:10m' }, { host: gatewayAddress });
  });

  afterAll(() => {
    for (const address of addresses) ip('-6', 'addr', 'del', `${address}/128`, 'dev', 'lo');
  });

  it('a /48 whose /64s each leave once is refused as a whole once together they pass four times the threshold; another /48 is not', async () => {
    const knocks: string[] = [];
    // Each /64 once (20 s, under a network's 30 s). Six (120 s) cannot pass the site's 120 s;
    // the seventh does unless the knocks took over 5 s, the ninth unless over 15 s.
    for (let n = 1; n <= 12 && knocks.at(-1) !== 'refused'; n++) knocks.push(await exchangeAndLeave(site(n), sitePort, gatewayAddress));
    expect(knocks.slice(0, 7)).toEqual(Array(7).fill('served'));
    expect(knocks.length).toBeLessThanOrEqual(10);
    expect(knocks.at(-1)).toBe('refused');
    // A /64 of that site never seen before is refused before the key exchange; another site is served.
    expect(await exchangeAndLeave(site(14), sitePort, gatewayAddress)).toBe('refused');
    expect(await exchangeAndLeave(otherSite, sitePort, gatewayAddress)).toBe('served');
  });
});

describe('SSH source penalties, with the kernel', () => {
  // A source beyond the host (the kernel never drops loopback): a network namespace behind
  // a veth pair, as a client on the provider's network would come in.
  const id = randomBytes(3).toString('hex');
  const ns = `svckd-${id}`;
  const octet = 1 + (parseInt(id.slice(0, 2), 16) % 250);
  const hostSide = { dev: `svckdh-${id}`, address: `10.253.${octet}.1` };
  const client = `10.253.${octet}.2`;
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
  const kernelDrop = new KernelDropList({ onError: (err) => expect.fail(err.message) });
  let kernelPort: number;

  beforeAll(async () => {
    ip('netns', 'add', ns);
    ip('link', 'add', hostSide.dev, 'type', 'veth', 'peer', 'name', `svckdn-${id}`, 'netns', ns);
    ip('addr', 'add', `${hostSide.address}/30`, 'dev', hostSide.dev);
    ip('link', 'set', hostSide.dev, 'up');
    ip('-n', ns, 'addr', 'add', `${client}/30`, 'dev', `svckdn-${id}`);
    ip('-n', ns, 'link', 'set', `svckdn-${id}`, 'up');
    // The agent's firewall, as every agent here installs it: it holds the drop rule.
    await installHostFirewall(buildFirewallRules({ instanceOutbound: 'internet', allowCidrs: [], blockedPorts: parsePortRules([DEFAULT_BLOCKED_PORTS]), maxConnectionsPerInstance: TEST_MAX_CONNECTIONS }));
    // 3 s a connection, dropped past 4 s, never more than 6 s: the second knock passes the
    // threshold however slowly the knocks come.
    kernelPort = await startGateway({ SVC_SSH_SOURCE_PENALTIES: 'noauth:3s min:4s max:6s' }, { host: hostSide.address, kernelDrop });
  });

  afterAll(async () => {
    await kernelDrop.close();
    ip('link', 'del', hostSide.dev);
    ip('netns', 'del', ns);
  });

  /** A TCP connection from the namespace, closed at once: 'accepted', or 'no answer' when nothing came back within 2 s. */
  const knock = async (): Promise<'accepted' | 'no answer'> => {
    const script = `exec 3<>/dev/tcp/${hostSide.address}/${kernelPort}`;
    try {
      await promisify(execFile)('ip', ['netns', 'exec', ns, 'timeout', '2', 'bash', '-c', script]);
      return 'accepted';
    } catch (err) {
      if ((err as { code?: number }).code === 124) return 'no answer';
      throw err;
    }
  };

  it('a penalized source is dropped by the kernel for its penalty: its connections get no answer at all, and come through once it has drained', async () => {
    const knocks: string[] = [];
    for (let i = 0; i < 6 && knocks.at(-1) !== 'no answer'; i++) knocks.push(await knock());
    // The second passes the threshold; from the one after it, none is answered.
    expect(knocks.slice(0, 2)).toEqual(['accepted', 'accepted']);
    expect(knocks.at(-1)).toBe('no answer');
    expect(readFileSync(`/proc/net/xt_recent/${PENALIZED_LISTS.ipv4}`, 'utf8')).toContain(`src=${client} `);
    expect(kernelDrop.size).toBe(1);
    // At most max (6 s) after it started, the kernel lets it through again.
    await new Promise((r) => setTimeout(r, 6_000));
    expect(readFileSync(`/proc/net/xt_recent/${PENALIZED_LISTS.ipv4}`, 'utf8')).not.toContain(`src=${client} `);
    expect(await knock()).toBe('accepted');
  }, 30_000);
});
