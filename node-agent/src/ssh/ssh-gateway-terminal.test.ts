// A terminal's window changes through the SSH gateway, against a real container: each
// resize is a Docker engine call, so a client sending them without end gets the latest
// size applied, in the instance's pace, and not one engine call per message. The engine
// calls are counted where dockerode makes them; the engine answers for real.
import { readdirSync } from 'node:fs';
import type { Socket } from 'node:net';
import Docker from 'dockerode';
import ssh2, { type ClientChannel } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { ensureBusybox } from '../runtime/docker-test-images.js';
import type { SshGateway } from './ssh-gateway.js';
import { MAX_QUEUED_REQUESTS, READER_IDLE_MS } from './sftp-session.js';
import { startTestGateway } from './test-gateway.js';

const docker = new Docker();
let resizeCalls = 0;
let container: Docker.Container;
let gateway: SshGateway;
let port: number;
let user: { privateKey: string };

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  container = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['sleep', '600'], Labels: { 'svc.test': 'ssh-gateway-terminal' } });
  await container.start();
  // Counted on their way to the engine.
  const modem = docker.modem as unknown as { dial(options: { path?: string }, callback: unknown): unknown };
  const dial = modem.dial.bind(modem);
  modem.dial = (options, callback) => {
    if (/^\/exec\/[^/]+\/resize/.test(options.path ?? '')) resizeCalls++;
    return dial(options, callback);
  };
  ({ gateway, port, user } = await startTestGateway({ instance: { instanceId: 'inst_terminal', containerId: container.id }, docker }));
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await container?.remove({ force: true }).catch(() => undefined);
});

/** Reads the shell's output until `pattern` shows up. */
function waitFor(stream: ClientChannel, pattern: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`no ${pattern} in ${JSON.stringify(text.slice(-500))}`)), 20_000);
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('utf8');
      const match = pattern.exec(text);
      if (!match) return;
      clearTimeout(timer);
      stream.off('data', onData);
      resolve(match);
    };
    stream.on('data', onData);
  });
}

describe('SSH gateway terminals', () => {
  it('applies the latest of a flood of window changes, in a handful of engine calls', async () => {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => {
      client.on('ready', () => resolve());
      client.on('error', reject);
      client.connect({ host: '127.0.0.1', port, username: 'inst_terminal', privateKey: user.privateKey });
    });
    const shell = await new Promise<ClientChannel>((resolve, reject) => client.shell({ rows: 24, cols: 80, term: 'xterm' }, (err, stream) => (err ? reject(err) : resolve(stream))));
    shell.write('echo up\n');
    await waitFor(shell, /^up\r?$/m);
    const before = resizeCalls;
    for (let i = 1; i <= 300; i++) shell.setWindow(20 + (i % 40), 100 + (i % 50), 0, 0);
    shell.setWindow(33, 111, 0, 0);
    // The last size wins, once the calls in flight and its turn are through.
    let size: RegExpExecArray | undefined;
    for (let attempt = 0; attempt < 20 && size?.[0] !== '33 111'; attempt++) {
      shell.write('stty size\n');
      size = await waitFor(shell, /^\d+ \d+(?=\r?$)/m);
      if (size[0] !== '33 111') await new Promise((r) => setTimeout(r, 250));
    }
    expect(size?.[0]).toBe('33 111');
    expect(resizeCalls - before).toBeGreaterThan(0);
    expect(resizeCalls - before).toBeLessThan(20);
    client.end();
  }, 60_000);
});

describe('SSH gateway sessions', () => {
  it("cuts a connection that reads none of what it asks to be sent (replies to global requests, outside any channel's window), instead of holding it all", async () => {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => client.on('ready', () => resolve()).on('error', reject).connect({ host: '127.0.0.1', port, username: 'inst_terminal', privateKey: user.privateKey }));
    const internals = client as unknown as { _sock: Socket; _protocol: { tcpipForward(address: string, port: number, wantReply: boolean): void } };
    const socket = internals._sock;
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    client.on('error', () => undefined);
    // Never read the gateway again.
    socket.removeAllListeners('data');
    socket.pause();
    let cut = false;
    void closed.then(() => (cut = true));
    const deadline = Date.now() + 40_000;
    while (!cut && Date.now() < deadline) {
      if (socket.writableLength < 8 * 2 ** 20) for (let i = 0; i < 2_000; i++) internals._protocol.tcpipForward('a', 1, true);
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(cut).toBe(true);
    client.end();
  }, 60_000);


  it('closes an SFTP session whose client sends requests far faster than they are answered, instead of queueing them without end; a new session works', async () => {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => client.on('ready', () => resolve()).on('error', reject).connect({ host: '127.0.0.1', port, username: 'inst_terminal', privateKey: user.privateKey }));
    try {
      const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
      const outcomes = await Promise.all(
        Array.from({ length: MAX_QUEUED_REQUESTS * 3 }, () => new Promise<string>((resolve) => sftp.stat('/root', (err) => resolve(err ? 'failed' : 'answered')))),
      );
      // Paced, the first ones are answered; past the cap the session is gone and the rest fail.
      expect(outcomes.filter((o) => o === 'failed').length).toBeGreaterThan(MAX_QUEUED_REQUESTS);
      const again = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
      const stat = await new Promise<ssh2.Stats>((resolve, reject) => again.stat('/root', (err, st) => (err ? reject(err) : resolve(st))));
      expect(stat.isDirectory()).toBe(true);
    } finally {
      client.end();
    }
  }, 60_000);


  it("closes an SFTP read's engine stream once the client stops reading (Docker locks the container while it is open: its stop hung); the next read goes on where it was", async () => {
    const made = await container.exec({ Cmd: ['sh', '-c', 'seq 1 300000 > /root/big'], AttachStdout: true, AttachStderr: true });
    const output = await made.start({});
    output.resume();
    await new Promise((r) => output.on('end', r));
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => client.on('ready', () => resolve()).on('error', reject).connect({ host: '127.0.0.1', port, username: 'inst_terminal', privateKey: user.privateKey }));
    try {
      const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
      const handle = await new Promise<Buffer>((resolve, reject) => sftp.open('/root/big', 'r', (err, h) => (err ? reject(err) : resolve(h))));
      const read = (position: number) =>
        new Promise<Buffer>((resolve, reject) => {
          const buffer = Buffer.alloc(32_768);
          sftp.read(handle, buffer, 0, buffer.length, position, (err, n) => (err ? reject(err) : resolve(buffer.subarray(0, n))));
        });
      const first = await read(0);
      await new Promise((r) => setTimeout(r, READER_IDLE_MS + 1_500));
      // The engine answers for the container again.
      const started = Date.now();
      await container.inspect();
      expect(Date.now() - started).toBeLessThan(2_000);
      const second = await read(first.length);
      const expected = Array.from({ length: 300_000 }, (_, i) => `${i + 1}\n`).join('');
      expect(Buffer.concat([first, second]).toString()).toBe(expected.slice(0, first.length + second.length));
    } finally {
      client.end();
    }
  }, 40_000);


  it('runs one program per session: more exec requests on a started session start nothing, and leave the agent no sockets', async () => {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => client.on('ready', () => resolve()).on('error', reject).connect({ host: '127.0.0.1', port, username: 'inst_terminal', privateKey: user.privateKey }));
    const fds = (): number => readdirSync('/proc/self/fd').length;
    const before = fds();
    const programs = async (): Promise<number> => ((await container.top({ ps_args: '-o pid,args' })) as { Processes: string[][] }).Processes.filter((p) => p.join(' ').includes('sleep 4242')).length;
    const channel = await new Promise<ClientChannel>((resolve, reject) => client.exec('sleep 4242', (err, ch) => (err ? reject(err) : resolve(ch))));
    // What no client library sends but a hostile one can: more exec requests on the same channel.
    const protocol = (client as unknown as { _protocol: { exec(id: number, command: string, wantReply: boolean): void } })._protocol;
    for (let i = 0; i < 10; i++) protocol.exec((channel as unknown as { outgoing: { id: number } }).outgoing.id, 'sleep 4242', false);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await programs()).toBe(1);
    client.end();
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await programs()).toBe(0);
    expect(fds() - before).toBeLessThanOrEqual(2);
  }, 30_000);
});
