// SSH into instances end to end, with the real OpenSSH client (ssh, scp, sftp) against a
// real control plane, a real agent process and real containers: the agent's gateway runs
// every session inside the container through Docker exec, so the busybox images here need
// no sshd. Host keys are checked strictly against what the instance read reports.
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLEEPER_IMAGE, STUBBORN_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';
import { eventually, freePort } from './support/node-agent-process.js';
import { keygen, knownHostsFor, remote, run, scp, sftp, ssh, sshProcess, type KeyPair, type SshTarget } from './support/openssh.js';

const docker = new Docker();
let stack: InstanceStack;
let keys: Record<'edA' | 'ecA' | 'rsaA' | 'edB' | 'stranger', KeyPair>;
let a: { id: string; ssh: any; target: SshTarget };
let b: { id: string; ssh: any; target: SshTarget };

/** Command lines of the processes in an instance's container, from the host (no tools needed inside). */
async function processesIn(id: string): Promise<string[]> {
  const top = (await docker.getContainer(`svc-instance-${id}`).top({ ps_args: '-eo pid,args' })) as { Processes: string[][] };
  return top.Processes.map((p) => p[1] ?? '');
}

async function readyInstance(name: string, image: string, sshKeys: KeyPair[]): Promise<{ id: string; ssh: any; target: SshTarget }> {
  const created = await stack.create({ image, ssh_keys: sshKeys.map((k) => k.publicKey) });
  expect(created.status).toBe(201);
  expect(created.body.ssh).toBeNull(); // not before ready
  const ready = await stack.waitFor(created.body.id, ['ready']);
  return { id: ready.id, ssh: ready.ssh, target: { host: ready.ssh.host, port: ready.ssh.port, user: ready.ssh.user, knownHosts: knownHostsFor(stack.dir, name, ready.ssh) } };
}

beforeAll(async () => {
  stack = await startInstanceStack({ name: 'ssh-e2e', gpus: 2 });
  keys = {
    edA: await keygen(stack.dir, 'ed_a', 'ed25519'),
    ecA: await keygen(stack.dir, 'ec_a', 'ecdsa'),
    rsaA: await keygen(stack.dir, 'rsa_a', 'rsa'),
    edB: await keygen(stack.dir, 'ed_b', 'ed25519'),
    stranger: await keygen(stack.dir, 'stranger', 'ed25519'),
  };
  [a, b] = await Promise.all([
    readyInstance('a', SLEEPER_IMAGE, [keys.edA, keys.ecA, keys.rsaA]),
    // B ignores SIGTERM, so its termination has a draining phase to look at.
    readyInstance('b', STUBBORN_IMAGE, [keys.edB]),
  ]);
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

describe('SSH into instances with OpenSSH', () => {
  it('reads show the endpoint, the command and the host key the client then verifies', async () => {
    expect(a.ssh).toMatchObject({ host: '127.0.0.1', user: a.id, command: `ssh -p ${a.ssh.port} ${a.id}@127.0.0.1` });
    expect(b.ssh.port).toBe(a.ssh.port); // one port per node
    const listed = await run('ssh-keygen', ['-lf', a.target.knownHosts]);
    expect(listed.stdout).toContain(a.ssh.host_key_fingerprint);
    expect(a.ssh.host_key_fingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
    // The busybox image has no Jupyter: the read says so instead of a URL.
    const read = await stack.read(a.id);
    expect(read.jupyter).toBeNull();
    expect(read.jupyter_unavailable_reason).toMatch(/no Jupyter/);
  });

  it('runs a command inside the container: stdout, stderr and the exit status as OpenSSH reports them', async () => {
    const r = await ssh(a.target, keys.edA, ['echo "inside $SVC_INSTANCE_ID"; echo oops >&2; exit 7']);
    expect(r.stdout).toBe(`inside ${a.id}\n`);
    expect(r.stderr).toBe('oops\n');
    expect(r.code).toBe(7);
    expect((await ssh(a.target, keys.edA, ['true'])).code).toBe(0);
    expect((await ssh(a.target, keys.edA, ['false'])).code).toBe(1);
  });

  it('authenticates ed25519, ECDSA and RSA keys given at create time', async () => {
    for (const key of [keys.edA, keys.ecA, keys.rsaA]) {
      const r = await ssh(a.target, key, ['echo ok']);
      expect({ key: key.type, code: r.code, out: r.stdout }).toEqual({ key: key.type, code: 0, out: 'ok\n' });
    }
  });

  it('refuses a wrong key, and the key of instance A does not open instance B (nor B\'s A)', async () => {
    for (const [target, key] of [
      [a.target, keys.stranger],
      [b.target, keys.edA],
      [a.target, keys.edB],
    ] as const) {
      const r = await ssh(target, key, ['echo should-not-run']);
      expect(r.code).toBe(255);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('Permission denied (publickey)');
    }
    // An unknown instance id as the user is refused the same way.
    const r = await ssh({ ...a.target, user: 'inst_doesnotexist' }, keys.edA, ['true']);
    expect(r.code).toBe(255);
  });

  it('passes stdin through with EOF, and environment variables the client sends', async () => {
    const input = randomBytes(200_000);
    const r = await ssh(a.target, keys.edA, ['cat | md5sum'], { input });
    expect(r.stdout.split(' ')[0]).toBe(createHash('md5').update(input).digest('hex'));
    const env = await ssh(a.target, keys.edA, ['echo "$GREETING"'], { sshOptions: ['-o', 'SetEnv=GREETING=hello-from-client'] });
    expect(env.stdout).toBe('hello-from-client\n');
  });

  it('runs a pty session with the client\'s terminal type and size', async () => {
    // `script` gives ssh a terminal of a known size, as a user's would be.
    const r = await run('script', ['-qec', `stty rows 33 cols 101; TERM=xterm-256color ssh -tt -p ${a.target.port} -F /dev/null -i ${keys.edA.privateKey} -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=${a.target.knownHosts} -o LogLevel=ERROR ${a.id}@127.0.0.1 'tty; stty size; echo "term=$TERM"; exit 3'`, '/dev/null']);
    expect(r.stdout).toMatch(/\/dev\/pts\/\d+/);
    expect(r.stdout).toContain('33 101');
    expect(r.stdout).toContain('term=xterm-256color');
    expect(r.code).toBe(3);
  });

  it('follows window changes of an interactive shell', async () => {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve()).once('error', reject);
      client.connect({ host: '127.0.0.1', port: a.target.port, username: a.id, privateKey: readFileSync(keys.edA.privateKey) });
    });
    try {
      const stream = await new Promise<ssh2.ClientChannel>((resolve, reject) =>
        client.shell({ term: 'xterm', rows: 24, cols: 80 }, (err, s) => (err ? reject(err) : resolve(s))),
      );
      let output = '';
      stream.on('data', (d: Buffer) => (output += d.toString()));
      stream.write('stty size\n');
      await eventually(() => output.includes('24 80'), 10_000, 'the first size');
      stream.setWindow(40, 132, 0, 0);
      await new Promise((r) => setTimeout(r, 300));
      stream.write('stty size\n');
      await eventually(() => output.includes('40 132'), 10_000, 'the new size');
      stream.write('exit 4\n');
      const code = await new Promise<number>((resolve) => stream.once('exit', (c: number) => resolve(c)));
      expect(code).toBe(4);
    } finally {
      client.end();
    }
  });

  it('copies files with scp both ways, byte for byte', async () => {
    const local = join(stack.dir, 'upload.bin');
    const data = randomBytes(3 * 1024 * 1024 + 17);
    writeFileSync(local, data);
    const up = await scp(a.target, keys.edA, local, remote(a.target, '/root/upload.bin'));
    expect(up).toMatchObject({ code: 0, stderr: '' });
    const inside = await ssh(a.target, keys.edA, ['sha256sum /root/upload.bin']);
    expect(inside.stdout.split(' ')[0]).toBe(createHash('sha256').update(data).digest('hex'));
    const back = join(stack.dir, 'download.bin');
    const down = await scp(a.target, keys.edA, remote(a.target, '/root/upload.bin'), back);
    expect(down).toMatchObject({ code: 0, stderr: '' });
    expect(readFileSync(back).equals(data)).toBe(true);
  });

  it('lists, makes and removes with sftp', async () => {
    await ssh(a.target, keys.edA, ['mkdir -p /root/box && echo one > /root/box/first.txt && echo two > /root/box/second.txt']);
    const r = await sftp(a.target, keys.edA, 'cd /root/box\nls -1\nmkdir made-by-sftp\nrm first.txt\nls -1\n');
    expect(r.code).toBe(0);
    const listings = r.stdout.split('sftp> ls -1').slice(1);
    expect(listings[0]).toContain('first.txt');
    expect(listings[0]).toContain('second.txt');
    expect(listings[1]).not.toContain('first.txt');
    expect(listings[1]).toContain('made-by-sftp');
    expect((await ssh(a.target, keys.edA, ['ls /root/box'])).stdout.split('\n').filter(Boolean).sort()).toEqual(['made-by-sftp', 'second.txt']);
  });

  it('forwards a local port to a server listening inside the container (ssh -L), and nowhere else', async () => {
    const started = await ssh(a.target, keys.edA, ['mkdir -p /tmp/www && echo "served from $SVC_INSTANCE_ID" > /tmp/www/index.html && httpd -p 8000 -h /tmp/www']);
    expect(started.code).toBe(0);
    const port = await freePort();
    const tunnel = sshProcess(a.target, keys.edA, [], ['-N', '-o', 'ExitOnForwardFailure=yes', '-L', `127.0.0.1:${port}:localhost:8000`]);
    try {
      const body = await eventually(async () => (await fetch(`http://127.0.0.1:${port}/`)).text(), 10_000, 'the forwarded port');
      expect(body).toBe(`served from ${a.id}\n`);
    } finally {
      tunnel.child.kill('SIGTERM');
    }
    // Anything but the container is refused: here a server on the node itself, reached
    // through the Docker bridge's gateway address, which the agent could otherwise connect to.
    const nodeServer = createServer((_req, res) => res.end('the node itself')).listen(0, '0.0.0.0');
    await once(nodeServer, 'listening');
    // The instance's own network (each instance has one): its gateway is the host's address on it.
    const gateway = Object.values((await docker.getContainer(`svc-instance-${a.id}`).inspect()).NetworkSettings.Networks)[0]!.Gateway;
    expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    const other = await freePort();
    const refused = sshProcess(a.target, keys.edA, [], ['-N', '-L', `127.0.0.1:${other}:${gateway}:${(nodeServer.address() as AddressInfo).port}`]);
    try {
      const outcome = await eventually(
        async () =>
          fetch(`http://127.0.0.1:${other}/`).then(
            async (res) => `answered: ${await res.text()}`,
            // Refused locally: the tunnel does not listen yet. Any other failure: the gateway said no.
            (e: Error) => (String((e.cause as Error | undefined)?.message ?? e).includes('ECONNREFUSED') ? undefined : 'refused'),
          ),
        10_000,
        'the tunnel to listen',
      );
      expect(outcome).toBe('refused');
    } finally {
      refused.child.kill('SIGTERM');
      nodeServer.close();
    }
  });

  it('leaves no processes in the container when a client drops', async () => {
    const session = sshProcess(a.target, keys.edA, ['sleep 4242 & sleep 4343']);
    const pty = sshProcess(a.target, keys.edA, ['sleep 4444'], ['-tt']);
    await eventually(async () => {
      const ps = await processesIn(a.id);
      return ['sleep 4242', 'sleep 4343', 'sleep 4444'].every((p) => ps.includes(p));
    }, 10_000, 'the sessions\' processes');
    session.child.kill('SIGKILL');
    pty.child.kill('SIGKILL');
    await eventually(async () => !(await processesIn(a.id)).some((p) => /sleep 4[234]4[234]/.test(p)), 10_000, 'the processes to be gone');
  });

  it('a restarted agent still lets the same keys in, with the same host key', async () => {
    const before = a.ssh.host_key_fingerprint;
    await stack.restartAgent();
    const read = await eventually(async () => {
      const r = await stack.read(a.id);
      return r.ssh && r.ssh.port !== a.ssh.port ? r : undefined; // test agents take a free port each start
    }, 20_000, 'the read to show the new port');
    expect(read.status).toBe('ready');
    expect(read.ssh.host_key_fingerprint).toBe(before);
    a = { ...a, ssh: read.ssh, target: { ...a.target, port: read.ssh.port, knownHosts: knownHostsFor(stack.dir, 'a2', read.ssh) } };
    b = { ...b, target: { ...b.target, port: read.ssh.port, knownHosts: a.target.knownHosts } };
    expect((await ssh(a.target, keys.rsaA, ['echo still here'])).stdout).toBe('still here\n');
    expect((await ssh(b.target, keys.edA, ['true'])).code).toBe(255);
  });

  it('while draining keeps open sessions and takes no new ones; termination ends the session', async () => {
    const session = sshProcess(b.target, keys.edB, ['echo started; sleep 600']);
    await eventually(() => session.output().includes('started'), 10_000, 'the session to start');
    expect((await stack.api('POST', `/v1/instances/${b.id}/terminate`)).body.status).toBe('draining');
    // B ignores SIGTERM: it drains for the 2 s grace. New logins are refused meanwhile.
    const late = await ssh(b.target, keys.edB, ['echo too-late']);
    expect(late.code).toBe(255);
    expect(session.child.exitCode).toBeNull();
    // SIGKILL after the grace ends the container and with it the session, which says why.
    const code = await session.exited;
    expect(code).not.toBe(0);
    expect(session.output()).toMatch(/stopping|terminated/);
    const done = await stack.waitFor(b.id, ['terminated']);
    expect(done.ssh).toBeNull();
    expect((await ssh(b.target, keys.edB, ['true'])).code).toBe(255);
  });
});
