// The SSH gateway against a tenant who means harm, end to end: a real control plane, a
// real agent process, real containers, the real OpenSSH client and ssh2 as a client
// where a test needs requests OpenSSH would not send (signal storms, channel floods,
// out-of-order SFTP writes). The agent runs with its own TMPDIR, so what SFTP leaves in
// the node's temp directory can be watched.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitAndPush, deleteFreshImage } from '../node-agent/src/runtime/docker-test-images.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';
import { eventually } from './support/node-agent-process.js';
import { keygen, knownHostsFor, remote, run, ssh, sshProcess, type KeyPair, type SshTarget } from './support/openssh.js';
import { buildStaticProgram } from './support/static-program.js';

const execFileP = promisify(execFile);
const docker = new Docker();
const PENDING_HANDSHAKES = 4;
const CONNECTIONS_PER_INSTANCE = 3;
const agentTmp = mkdtempSync(join(tmpdir(), 'hostile-agent-tmp-'));
let stack: InstanceStack;
let key: KeyPair;
let a: { id: string; target: SshTarget };

/** Bytes under a directory, as `du` counts them (apparent sizes). */
async function du(dir: string): Promise<number> {
  const { stdout } = await execFileP('du', ['-sb', dir]);
  return Number(stdout.split('\t')[0]);
}

function client(): Promise<ssh2.Client> {
  const c = new ssh2.Client();
  return new Promise((resolve, reject) => {
    c.once('ready', () => resolve(c)).once('error', reject);
    c.connect({ host: '127.0.0.1', port: a.target.port, username: a.id, privateKey: readFileSync(key.privateKey), readyTimeout: 60_000 });
  });
}

const exec = (c: ssh2.Client, command: string): Promise<ssh2.ClientChannel> =>
  new Promise((resolve, reject) => c.exec(command, (err, stream) => (err ? reject(err) : resolve(stream))));

/** Resolves with the exit code (or signal name) when the channel closes. */
function exitOf(stream: ssh2.ClientChannel): Promise<number | string | null> {
  return new Promise((resolve) => {
    let status: number | string | null = null;
    stream.on('exit', (code: number | null, signal?: string) => (status = code ?? signal ?? null));
    stream.on('data', () => undefined);
    stream.stderr.on('data', () => undefined);
    stream.once('close', () => resolve(status));
  });
}

function agentAlive(): boolean {
  return stack.agent.child.exitCode === null && stack.agent.child.signalCode === null;
}

beforeAll(async () => {
  stack = await startInstanceStack({
    name: 'hostile-ssh',
    // The second GPU: an instance made from another tenant's image, in the image-labels test.
    gpus: 2,
    agentEnv: {
      TMPDIR: agentTmp,
      SVC_SSH_MAX_PENDING_HANDSHAKES: String(PENDING_HANDSHAKES),
      SVC_SSH_HANDSHAKE_TIMEOUT_MS: '10000',
      SVC_SSH_MAX_CONNECTIONS_PER_INSTANCE: String(CONNECTIONS_PER_INSTANCE),
    },
  });
  key = await keygen(stack.dir, 'tenant', 'ed25519');
  const created = await stack.create({ image: SLEEPER_IMAGE, ssh_keys: [key.publicKey] });
  expect(created.status).toBe(201);
  const ready = await stack.waitFor(created.body.id, ['ready']);
  a = { id: ready.id, target: { host: ready.ssh.host, port: ready.ssh.port, user: ready.ssh.user, knownHosts: knownHostsFor(stack.dir, 'a', ready.ssh) } };
}, 120_000);

afterAll(async () => {
  await stack?.close();
  rmSync(agentTmp, { recursive: true, force: true });
});

describe('as a hostile tenant', () => {
  it('an SSH signal storm right after exec leaves the agent alive and answering', async () => {
    // Docker reports an exec's pid as 0 until it runs; kill(0) would hit the agent's own
    // process group. Signals go out from the moment the exec is acknowledged until it ends.
    const names = ['INT', 'TERM', 'HUP', 'KILL', 'USR1', 'QUIT'];
    let sent = 0;
    for (let round = 0; round < 3; round++) {
      const c = await client();
      try {
        const sessions = await Promise.all(
          Array.from({ length: 6 }, async (_, i) => {
            const stream = await exec(c, i % 2 === 0 ? 'sleep 1' : 'trap "" INT TERM HUP USR1 QUIT; sleep 1');
            const done = exitOf(stream);
            let open = true;
            void done.then(() => (open = false));
            const storm = async (): Promise<void> => {
              for (let n = 0; open && n < 300; n++) {
                stream.signal(names[n % names.length]!);
                sent++;
                if (n % 20 === 19) await new Promise((r) => setImmediate(r));
              }
            };
            await storm();
            return done;
          }),
        );
        expect(sessions).toHaveLength(6);
      } finally {
        c.end();
      }
      console.log(`storm round ${round}: ${sent} signals sent so far`);
      expect(agentAlive()).toBe(true);
    }
    expect(sent).toBeGreaterThan(1000);
    expect(agentAlive()).toBe(true);
    expect(stack.cp.gateway.session(stack.nodeId)).toBeDefined();
    expect((await ssh(a.target, key, ['echo still answering'])).stdout).toBe('still answering\n');
    // Signals still reach the session's own process once it runs.
    const c = await client();
    try {
      const stream = await exec(c, 'echo ready; sleep 60');
      let out = '';
      stream.on('data', (d: Buffer) => (out += d.toString()));
      const done = exitOf(stream);
      await eventually(() => out.includes('ready'), 20_000, 'the command to start');
      stream.signal('TERM');
      expect(await done).toBe(143); // 128 + SIGTERM, as Docker reports it
    } finally {
      c.end();
    }
  }, 300_000);

  it("an image's own labels authorize no key: a tenant who publishes an image labelled with the agent's key label cannot log in to the instances others make from it", async () => {
    // Docker merges an image's labels under the container's, and the agent keeps an
    // instance's keys in a label. The victim gives no SSH key (Jupyter only).
    const author = await keygen(stack.dir, 'image-author', 'ed25519');
    const image = `127.0.0.1:5000/svc/labelled-${randomBytes(4).toString('hex')}:1`;
    const builder = await docker.createContainer({ Image: SLEEPER_IMAGE, Labels: { 'svc.test': 'hostile-ssh' } });
    try {
      await commitAndPush(docker, builder, image, `LABEL "svc.ssh-authorized-keys"="${author.publicKey.trim()}" "svc.network-mbps"="1"`);
    } finally {
      await builder.remove({ force: true });
    }
    try {
      expect((await docker.getImage(image).inspect()).Config.Labels).toMatchObject({ 'svc.ssh-authorized-keys': author.publicKey.trim() });
      const created = await stack.create({ image, ssh_keys: [] });
      expect(created.status).toBe(201);
      const victim = await stack.waitFor(created.body.id, ['ready']);
      const target = { host: victim.ssh.host, port: victim.ssh.port, user: victim.ssh.user, knownHosts: knownHostsFor(stack.dir, 'labelled', victim.ssh) };
      const r = await ssh(target, author, ['echo let-in']);
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 255, stdout: '' });
      expect(r.stderr).toContain('Permission denied (publickey)');
      const labels = (await docker.getContainer(`svc-instance-${victim.id}`).inspect()).Config.Labels;
      expect({ keys: labels['svc.ssh-authorized-keys'], mbps: labels['svc.network-mbps'] }).toEqual({ keys: '', mbps: expect.not.stringMatching(/^1$/) });
      await stack.api('POST', `/v1/instances/${victim.id}/terminate`, { force: true });
      await stack.waitFor(victim.id, ['terminated']);
    } finally {
      await deleteFreshImage(docker, image);
    }
  }, 180_000);

  it("an instance that takes every terminal it can takes only its own: another tenant's `ssh -t` still gets one", async () => {
    // With Docker's /dev/pts one container took the host's 3,071 terminals for containers,
    // and no other instance on the node could open a session with a terminal.
    const created = await stack.create({ image: SLEEPER_IMAGE, ssh_keys: [key.publicKey] });
    expect(created.status).toBe(201);
    const other = await stack.waitFor(created.body.id, ['ready']);
    const b = { host: other.ssh.host, port: other.ssh.port, user: other.ssh.user, knownHosts: knownHostsFor(stack.dir, 'ptys-b', other.ssh) };
    const hog = readFileSync(await buildStaticProgram('pty-hog'));
    expect((await ssh(a.target, key, ['cat > /tmp/pty-hog && chmod +x /tmp/pty-hog'], { input: hog })).code).toBe(0);
    const holding = sshProcess(a.target, key, ['/tmp/pty-hog', '120']);
    try {
      // SVC_TASK_MAX_PTYS, the agent's default.
      expect(await eventually(() => /^\d+ \w+\n/.exec(holding.output())?.[0], 20_000, 'the hog to report')).toBe('1024 ENOSPC\n');
      const inB = await ssh(b, key, ['tty'], { sshOptions: ['-tt'] });
      expect({ code: inB.code, tty: inB.stdout.trim() }).toEqual({ code: 0, tty: expect.stringMatching(/^\/dev\/pts\/\d+$/) });
      // A, holding all of its own, gets none.
      const inA = await ssh(a.target, key, ['tty'], { sshOptions: ['-tt'] });
      expect({ code: inA.code, said: inA.stdout }).toEqual({ code: 126, said: expect.stringContaining('open /dev/ptmx: no space left on device') });
    } finally {
      holding.child.kill();
      await holding.exited;
      await stack.api('POST', `/v1/instances/${other.id}/terminate`, { force: true });
      await stack.waitFor(other.id, ['terminated']);
    }
  }, 180_000);

  it("sessions opened in a loop are paced to what the engine may spend on one instance: they wait, none is refused", async () => {
    // Each session is a Docker exec, which costs dockerd, containerd and runc about 40 ms of
    // the host's CPU outside the instance's quota. At the default 40 engine calls a second,
    // an exec counting 8, an instance starts 5 processes a second after a burst of 20.
    const clients = await Promise.all(Array.from({ length: CONNECTIONS_PER_INSTANCE }, () => client()));
    const SESSIONS = 50;
    let next = 0;
    const codes: Array<number | string | null> = [];
    const started = performance.now();
    try {
      await Promise.all(
        clients.flatMap((c) =>
          Array.from({ length: 8 }, async () => {
            while (next < SESSIONS) {
              next++;
              codes.push(await exitOf(await exec(c, 'true')));
            }
          }),
        ),
      );
    } finally {
      for (const c of clients) c.end();
    }
    const seconds = (performance.now() - started) / 1000;
    expect(codes).toEqual(Array.from({ length: SESSIONS }, () => 0));
    // Unpaced, 24 at a time, they took 1.8 s here.
    expect(seconds).toBeGreaterThanOrEqual((SESSIONS - 20) / 5 - 0.5);
  }, 120_000);

  it('a session whose client leaves while it waits its turn starts nothing', async () => {
    const busy = [await client(), await client()];
    const leaver = await client();
    const marker = `/tmp/left-early-${randomBytes(4).toString('hex')}`;
    try {
      // 20 sessions at once, the whole burst, so the next one waits its turn.
      const held = busy.flatMap((c) => Array.from({ length: 10 }, () => exec(c, 'sleep 1').then(exitOf)));
      await new Promise((r) => setTimeout(r, 100));
      const waiting = await exec(leaver, `touch ${marker}`);
      waiting.on('data', () => undefined);
      leaver.end();
      expect(await Promise.all(held)).toEqual(Array.from({ length: 20 }, () => 0));
      const check = await exec(busy[0]!, `test -e ${marker} && echo started || echo nothing`);
      let said = '';
      check.on('data', (d: Buffer) => (said += d.toString()));
      await exitOf(check);
      expect(said.trim()).toBe('nothing');
    } finally {
      for (const c of [...busy, leaver]) c.end();
    }
  }, 60_000);

  it('a connection holds at most 10 channels; more are refused, and a closed one makes room', async () => {
    const c = await client();
    try {
      const held = await Promise.all(Array.from({ length: 10 }, () => exec(c, 'sleep 60')));
      await expect(exec(c, 'echo eleventh')).rejects.toThrow(/open failure|prohibited/i);
      const forward = new Promise((resolve, reject) => c.forwardOut('127.0.0.1', 0, 'localhost', 8000, (err, s) => (err ? reject(err) : resolve(s))));
      await expect(forward).rejects.toThrow(/open failure|prohibited/i);
      const first = exitOf(held[0]!);
      held[0]!.close();
      await first;
      const next = await exec(c, 'echo room again');
      let out = '';
      next.on('data', (d: Buffer) => (out += d.toString()));
      await exitOf(next);
      expect(out).toBe('room again\n');
    } finally {
      c.end();
    }
    expect(agentAlive()).toBe(true);
  }, 60_000);

  it('connections that never log in cannot keep a tenant out: the client holding the most slots gives one up, the login deadline closes the rest', async () => {
    // Silent sockets, all from one address: the gateway greets them and waits for a
    // handshake that never comes. They hold every handshake slot on the node.
    const silent: Array<{ socket: Socket; closed: Promise<void> }> = [];
    const from = (localAddress: string) => connect({ host: a.target.host, port: a.target.port, localAddress });
    for (let i = 0; i < PENDING_HANDSHAKES; i++) {
      const socket = from('127.0.0.2');
      const greeted = new Promise<void>((resolve) => socket.once('data', () => resolve()));
      socket.on('error', () => undefined);
      silent.push({ socket, closed: new Promise((resolve) => socket.once('close', () => resolve())) });
      await greeted;
    }
    // One more from the same address is closed at once, without a greeting: a client
    // cannot take a slot from itself.
    const extra = from('127.0.0.2');
    let greetedExtra = false;
    extra.on('data', () => (greetedExtra = true));
    extra.on('error', () => undefined);
    await new Promise((resolve) => extra.once('close', resolve));
    expect(greetedExtra).toBe(false);
    // The tenant, from another address, logs in all the same: the silent client's oldest
    // connection is dropped to make room, the others are left to their deadline.
    const closedFirst = await Promise.race([silent[0]!.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 100))]);
    expect(closedFirst).toBe(false);
    expect((await ssh(a.target, key, ['echo fair share'])).stdout).toBe('fair share\n');
    await silent[0]!.closed;
    expect(silent.slice(1).every((s) => !s.socket.destroyed && s.socket.readyState === 'open')).toBe(true);
    // The login deadline (10 s here) closes the rest.
    await Promise.all(silent.map((s) => s.closed));
    expect(agentAlive()).toBe(true);
  }, 90_000);

  it('an instance takes a bounded number of logged-in connections; one more is refused until one leaves', async () => {
    const held = [];
    for (let i = 0; i < CONNECTIONS_PER_INSTANCE; i++) held.push(await client());
    await expect(client()).rejects.toThrow(/authentication methods failed/);
    held.pop()!.end();
    const again = await eventually(() => client().catch(() => undefined), 20_000, 'a free connection slot');
    again.end();
    for (const c of held) c.end();
  }, 90_000);

  it('a connection is closed after 6 failed logins, however many keys the client has', async () => {
    const wrong = await Promise.all(Array.from({ length: 12 }, (_, i) => keygen(stack.dir, `wrong-${i}`, 'ed25519')));
    let tries = 0;
    const c = new ssh2.Client();
    const ended = new Promise<string>((resolve) => {
      c.once('ready', () => resolve('logged in'));
      c.once('error', (err: Error) => resolve(err.message));
      c.once('close', () => resolve('closed by the gateway'));
    });
    c.connect({
      host: '127.0.0.1',
      port: a.target.port,
      username: a.id,
      readyTimeout: 60_000,
      authHandler: (_methods: unknown, _partial: unknown, next: (method: unknown) => void) => {
        if (tries >= wrong.length) return next(false);
        next({ type: 'publickey', username: a.id, key: readFileSync(wrong[tries++]!.privateKey) });
      },
    } as ssh2.ConnectConfig);
    expect(await ended).not.toBe('logged in');
    c.end();
    // The 6th failure closes the connection; a 7th may be on its way as it closes.
    expect(tries).toBeGreaterThanOrEqual(6);
    expect(tries).toBeLessThanOrEqual(7);
  }, 90_000);

  it('SFTP writes are put in order within a window; rewrites and writes far ahead get a clear error', async () => {
    const c = await client();
    try {
      const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => c.sftp((err, s) => (err ? reject(err) : resolve(s))));
      const open = (path: string): Promise<Buffer> => new Promise((resolve, reject) => sftp.open(path, 'w', (err, h) => (err ? reject(err) : resolve(h))));
      const write = (h: Buffer, data: Buffer, position: number): Promise<void> =>
        new Promise((resolve, reject) => sftp.write(h, data, 0, data.length, position, (err) => (err ? reject(err) : resolve())));
      const close = (h: Buffer): Promise<void> => new Promise((resolve, reject) => sftp.close(h, (err) => (err ? reject(err) : resolve())));

      const parts = [randomBytes(40_000), randomBytes(40_000), randomBytes(40_000)];
      const h = await open('/root/ordered.bin');
      // The last part first, then the middle, then the start: all wait for their gap.
      await write(h, parts[2]!, 80_000);
      await write(h, parts[1]!, 40_000);
      await write(h, parts[0]!, 0);
      await close(h);
      const sum = await ssh(a.target, key, ['sha256sum /root/ordered.bin']);
      expect(sum.stdout.split(' ')[0]).toBe(createHash('sha256').update(Buffer.concat(parts)).digest('hex'));

      const h2 = await open('/root/refused.bin');
      await write(h2, randomBytes(1000), 0);
      await expect(write(h2, randomBytes(10), 500)).rejects.toThrow(/goes back over bytes already written/);
      await expect(write(h2, randomBytes(10), 64 * 1024 * 1024)).rejects.toThrow(/bytes ahead of the upload/);
      await close(h2);
      sftp.end();
    } finally {
      c.end();
    }
  }, 60_000);

  it('a 2 GB upload over SFTP streams into the container: the node\'s temp directory stays as it was', async () => {
    const size = 2 * 1024 ** 3;
    const local = join(stack.dir, 'big.bin');
    // 2 GiB of 4 MiB blocks, each made distinct by its index, so a reordered or lost block shows.
    const block = randomBytes(4 * 1024 * 1024);
    const hash = createHash('sha256');
    const out = createWriteStream(local);
    for (let i = 0; i < size / block.length; i++) {
      block.writeUInt32BE(i, 0);
      hash.update(block);
      if (!out.write(Buffer.from(block))) await new Promise<void>((r) => out.once('drain', () => r()));
    }
    await new Promise<void>((resolve, reject) => {
      out.once('error', reject);
      out.end(() => resolve());
    });
    const expected = hash.digest('hex');

    const before = await du(agentTmp);
    const agentRss = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${stack.agent.child.pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
    const rssBefore = agentRss();
    let peak = before;
    let rssPeak = rssBefore;
    let polling = true;
    const poller = (async () => {
      while (polling) {
        peak = Math.max(peak, await du(agentTmp));
        rssPeak = Math.max(rssPeak, agentRss());
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    const started = Date.now();
    const up = await run('scp', ['-P', String(a.target.port), '-F', '/dev/null', '-i', key.privateKey, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${a.target.knownHosts}`, '-o', 'LogLevel=ERROR', local, remote(a.target, '/root/big.bin')], { timeoutMs: 900_000 });
    const seconds = (Date.now() - started) / 1000;
    polling = false;
    await poller;
    rmSync(local, { force: true });
    console.log(`2 GiB SFTP upload: ${seconds.toFixed(1)} s (${(size / 1024 ** 2 / seconds).toFixed(0)} MiB/s); agent temp dir ${before} bytes before, peak ${peak} bytes during; agent RSS ${(rssBefore / 1024 ** 2).toFixed(0)} MiB before, peak ${(rssPeak / 1024 ** 2).toFixed(0)} MiB`);
    expect(up).toMatchObject({ code: 0, stderr: '' });
    expect(peak - before).toBeLessThan(1024 * 1024);
    expect(await du(agentTmp)).toBe(before);

    const inside = await ssh(a.target, key, ['stat -c %s /root/big.bin && sha256sum /root/big.bin && rm /root/big.bin'], { timeoutMs: 300_000 });
    const [bytes, sum] = inside.stdout.split('\n');
    expect(Number(bytes)).toBe(size);
    expect(sum!.split(' ')[0]).toBe(expected);
  }, 900_000);

  it('downloads stream out of the container without a copy on the node', async () => {
    const made = await ssh(a.target, key, ['head -c 50000000 /dev/urandom > /root/down.bin && sha256sum /root/down.bin']);
    const before = await du(agentTmp);
    const back = join(stack.dir, 'down.bin');
    const down = await run('scp', ['-P', String(a.target.port), '-F', '/dev/null', '-i', key.privateKey, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', `UserKnownHostsFile=${a.target.knownHosts}`, '-o', 'LogLevel=ERROR', remote(a.target, '/root/down.bin'), back], { timeoutMs: 120_000 });
    expect(down).toMatchObject({ code: 0, stderr: '' });
    expect(createHash('sha256').update(readFileSync(back)).digest('hex')).toBe(made.stdout.split(' ')[0]);
    expect(await du(agentTmp)).toBe(before);
  }, 120_000);
});
