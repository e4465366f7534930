// What one instance's SFTP sessions may hold on the node at once, against a real container
// of an image without /bin/sh: uploads staged on the node's disk (each file is put into the
// container whole at close; SVC_SFTP_STAGE_BUDGET_BYTES for all of them), and directory
// listings held open in the agent's memory. Before, only each file and each listing was
// bounded: 10 connections x 32 sessions x 64 handles could hold 1.3 TB of the host's disk,
// or far more listings than the agent has memory.
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerAvailable } from '../../../test/support/images.js';
import { buildStaticProgram } from '../../../test/support/static-program.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { sshLimitsOf } from '../access/start-access.js';
import type { SshGateway } from './ssh-gateway.js';
import { startTestGateway } from './test-gateway.js';

const docker = new Docker();
const IMAGE = 'svc-test/no-shell:1';
const INSTANCE = 'inst_noshell';
const KIB = 1024;
let container: Docker.Container;
let gateway: SshGateway;
let port: number;
let user: { privateKey: string };

/** An image of one static program and a home directory: no /bin/sh. */
async function buildNoShellImage(): Promise<void> {
  const pack = tar.pack();
  pack.entry({ name: 'pause', mode: 0o755 }, readFileSync(await buildStaticProgram('pause')));
  pack.entry({ name: 'root', type: 'directory', mode: 0o700 });
  pack.entry({ name: 'tmp', type: 'directory', mode: 0o1777 });
  pack.entry({ name: 'many', type: 'directory', mode: 0o755 });
  for (let i = 0; i < 300; i++) pack.entry({ name: `many/file-${i}`, mode: 0o644 }, '');
  pack.finalize();
  // dockerode answers with a promise when given no callback; its typings say void.
  const importing = docker.importImage(Readable.from(pack as unknown as AsyncIterable<Buffer>) as unknown as NodeJS.ReadableStream, { repo: 'svc-test/no-shell', tag: '1' } as never) as unknown;
  const imported = await (importing as Promise<NodeJS.ReadableStream>);
  await new Promise((resolve, reject) => docker.modem.followProgress(imported, (err: Error | null) => (err ? reject(err) : resolve(undefined))));
}

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await buildNoShellImage();
  container = await docker.createContainer({ Image: IMAGE, Cmd: ['/pause'], Labels: { 'svc.test': 'sftp-budgets' } });
  await container.start();
  const defaults = sshLimitsOf(loadAgentConfig({}));
  ({ gateway, port, user } = await startTestGateway({
    instance: { instanceId: INSTANCE, containerId: container.id },
    docker,
    limits: { sftp: { ...defaults.sftp, stageLimitBytes: 1024 * KIB, stageBudgetBytes: 2048 * KIB, listingBudgetBytes: 150 * KIB } },
  }));
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await container?.remove({ force: true }).catch(() => undefined);
  await docker.getImage(IMAGE).remove({ force: true }).catch(() => undefined);
});

describe('SFTP uploads staged on the node (an image without /bin/sh)', () => {
  it("hold at most the instance's staging budget at once, across files; a file put into the container gives its part back", async () => {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => client.on('ready', () => resolve()).on('error', reject).connect({ host: '127.0.0.1', port, username: INSTANCE, privateKey: user.privateKey }));
    try {
      const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
      const open = (path: string) => new Promise<Buffer>((resolve, reject) => sftp.open(path, 'w', (err, h) => (err ? reject(err) : resolve(h))));
      const write = (handle: Buffer, data: Buffer) => new Promise<void>((resolve, reject) => sftp.write(handle, data, 0, data.length, 0, (err) => (err ? reject(err) : resolve())));
      const close = (handle: Buffer) => new Promise<void>((resolve, reject) => sftp.close(handle, (err) => (err ? reject(err) : resolve())));
      const stat = (path: string) => new Promise<ssh2.Stats>((resolve, reject) => sftp.stat(path, (err, s) => (err ? reject(err) : resolve(s))));
      const data = Buffer.alloc(900 * KIB, 7);
      const [a, b, c] = [await open('/root/a'), await open('/root/b'), await open('/root/c')];
      await write(a, data);
      await write(b, data);
      // 2.7 MiB would be staged: past the budget of 2 MiB.
      await expect(write(c, data)).rejects.toThrow(/close some/);
      await close(a);
      expect((await stat('/root/a')).size).toBe(data.length);
      await write(c, data);
      await close(b);
      await close(c);
      expect((await stat('/root/c')).size).toBe(data.length);
    } finally {
      client.end();
    }
  }, 60_000);

  it('hold at most the instance\'s budget of listings open at once; a closed listing gives its part back', async () => {
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => client.on('ready', () => resolve()).on('error', reject).connect({ host: '127.0.0.1', port, username: INSTANCE, privateKey: user.privateKey }));
    try {
      const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
      const opendir = (path: string) => new Promise<Buffer>((resolve, reject) => sftp.opendir(path, (err, h) => (err ? reject(err) : resolve(h))));
      const readdir = (handle: Buffer) => new Promise<number>((resolve, reject) => sftp.readdir(handle, (err, list) => (err ? reject(err) : resolve(list.length))));
      const close = (handle: Buffer) => new Promise<void>((resolve, reject) => sftp.close(handle, (err) => (err ? reject(err) : resolve())));
      // 300 entries hold about 90 KiB: one fits the budget of 150 KiB, two do not.
      const first = await opendir('/many');
      expect(await readdir(first)).toBeGreaterThan(0);
      await expect(opendir('/many')).rejects.toThrow(/close some/);
      await close(first);
      const again = await opendir('/many');
      await close(again);
    } finally {
      client.end();
    }
  }, 60_000);
});
