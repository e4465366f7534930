// Host names a tenant chooses (an image's registry, which the node agent resolves, also
// for every host a pull reaches; a webhook's URL, which the control plane resolves),
// against a real DNS server that answers some names and never answers others. They are
// resolved in a child with its own /etc/resolv.conf (a mount namespace), as on a host
// whose resolver forwards to the tenant's silent name server.
import { execFile } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import dnsPacket from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SERVER = '127.0.0.77';
const dir = mkdtempSync(join(tmpdir(), 'tenant-dns-'));
const script = fileURLToPath(new URL('./support/resolve-names.ts', import.meta.url));
let server: Socket;
const asked: string[] = [];

beforeAll(async () => {
  server = createSocket('udp4');
  // Answers names under fast.test with a public address, and never answers slow.test.
  server.on('message', (message, from) => {
    const query = dnsPacket.decode(message);
    const question = query.questions?.[0];
    if (!question) return;
    asked.push(`${question.type} ${question.name}`);
    if (question.name.endsWith('.slow.test')) return;
    const answers = question.type === 'A' ? [{ type: 'A' as const, name: question.name, ttl: 60, data: '93.184.216.34' }] : [];
    const reply = dnsPacket.encode({ id: query.id, type: 'response', flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE, questions: [question], answers });
    server.send(reply, from.port, from.address);
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).bind(53, SERVER, resolve));
  writeFileSync(join(dir, 'resolv.conf'), `nameserver ${SERVER}\n`);
});

afterAll(() => {
  server?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Settled {
  host: string;
  result: unknown;
  ms: number;
}

/** Takes `hosts` at once in a child whose resolver is the test's server; in the order they settled. */
async function resolveInChild(mode: 'registry' | 'webhook', hosts: string[]): Promise<Settled[]> {
  const inner = `mount --bind ${join(dir, 'resolv.conf')} /etc/resolv.conf && exec "${process.execPath}" --import tsx "${script}" ${mode} ${hosts.join(' ')}`;
  const { stdout } = await new Promise<{ stdout: string }>((resolve, reject) =>
    execFile('unshare', ['--mount', 'sh', '-c', inner], { timeout: 60_000 }, (err, out, stderr) => (err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve({ stdout: out }))),
  );
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Settled);
}

describe("resolving a tenant's host names", () => {
  const slow = Array.from({ length: 6 }, (_, i) => `host${i}.slow.test`);

  it("the agent answers a registry at once while six others wait on a server that never answers, and gives those up", async () => {
    asked.length = 0;
    const settled = await resolveInChild('registry', [...slow, 'registry.fast.test']);
    // The answered name settles first, not queued behind the silent ones...
    expect(settled[0]).toEqual({ host: 'registry.fast.test', result: ['93.184.216.34'], ms: expect.any(Number) });
    // ...which all end as resolving to nothing (the registry check and the pull proxy refuse that).
    expect(settled.slice(1).map((s) => [s.host, s.result])).toEqual(expect.arrayContaining(slow.map((host) => [host, []])));
    expect(settled).toHaveLength(7);
    // They were asked of the server side by side, A and AAAA each.
    expect(asked).toEqual(expect.arrayContaining(slow.flatMap((host) => [`A ${host}`, `AAAA ${host}`])));
  });

  it('the control plane accepts a webhook URL at once while six others wait, and refuses those saying why', async () => {
    const settled = await resolveInChild('webhook', [...slow, 'hooks.fast.test']);
    expect(settled[0]).toEqual({ host: 'hooks.fast.test', result: null, ms: expect.any(Number) });
    expect(settled.slice(1).map((s) => s.result)).toEqual(slow.map(() => expect.stringMatching(/^url host host\d\.slow\.test does not resolve: ETIMEOUT$/)));
  });
});
