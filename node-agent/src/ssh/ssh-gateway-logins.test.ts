// What a logged-in client can make the SSH gateway's one thread do in key exchanges: its
// logins are paced with the instance's other work on the agent, and a connection that asks
// for new keys in a loop is closed. ssh2's own client, against a gateway whose registry
// holds one instance (no container is needed to log in).
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REKEY_BURST, type SshGateway } from './ssh-gateway.js';
import { startTestGateway } from './test-gateway.js';

// One engine call a second, four at once: a login counts 4, so one login at once and the next after 4 s.
const CALLS_PER_SECOND = 1;
let gateway: SshGateway;
let port: number;
let user: { privateKey: string };

beforeAll(async () => {
  ({ gateway, port, user } = await startTestGateway({ instance: { instanceId: 'inst_logins', containerId: 'none' }, limits: { engineCallsPerSecond: CALLS_PER_SECOND } }));
});

afterAll(async () => {
  await gateway?.close();
});

/** Logs in; the client, and how long the login took. */
function login(): Promise<{ client: ssh2.Client; ms: number }> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    const started = performance.now();
    client.on('ready', () => resolve({ client, ms: performance.now() - started }));
    client.on('error', reject);
    client.connect({ host: '127.0.0.1', port, username: 'inst_logins', privateKey: user.privateKey, readyTimeout: 20_000 });
  });
}

describe('SSH gateway logins and key re-exchanges', () => {
  it("paces an instance's logins with its other work on the agent: the one past the burst waits, and gets in", async () => {
    const first = await login();
    first.client.end();
    const second = await login();
    second.client.end();
    expect(first.ms).toBeLessThan(2_000);
    // Its turn comes once the instance has earned a login's worth again: 4 s at this rate.
    expect(second.ms).toBeGreaterThan(3_000);
  }, 30_000);

  it('closes a connection that asks for new keys in a loop', async () => {
    const { client } = await login();
    const protocol = (client as unknown as { _protocol: { rekey(): void } })._protocol;
    let rekeyed = 0;
    let closed = false;
    client.on('close', () => (closed = true));
    client.on('error', () => undefined);
    while (!closed && rekeyed < 200) {
      const done = await new Promise<boolean>((resolve) => {
        client.once('handshake', () => resolve(true));
        client.once('close', () => resolve(false));
        protocol.rekey();
      });
      if (done) rekeyed++;
    }
    expect({ closed, rekeyed }).toEqual({ closed: true, rekeyed: expect.any(Number) });
    expect(rekeyed).toBeLessThanOrEqual(REKEY_BURST + 1);
  }, 30_000);
});
