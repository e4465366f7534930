// An SFTP client reading a file slowly but steadily, against a real container: Docker
// 20.10 locks the container while an archive stream is open, so the engine could neither
// inspect nor kill it until the client stopped. A tenant whose instance was being stopped
// (terminated, its reservation or balance run out, over its disk limit) kept it running by
// holding one read open. Stopping an instance (draining its access) now closes its file
// streams, and opens no new one.
import Docker from 'dockerode';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE, dockerAvailable } from '../../../test/support/images.js';
import { ensureBusybox } from '../runtime/docker-test-images.js';
import type { AccessRegistry } from '../access/access-registry.js';
import type { SshGateway } from './ssh-gateway.js';
import { READER_IDLE_MS } from './sftp-session.js';
import { startTestGateway } from './test-gateway.js';

const docker = new Docker();
const INSTANCE = 'inst_sftpstop';
let container: Docker.Container;
let gateway: SshGateway;
let registry: AccessRegistry;
let port: number;
let user: { privateKey: string };

beforeAll(async () => {
  if (!(await dockerAvailable(docker))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  await ensureBusybox(docker);
  container = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['sleep', '600'], Labels: { 'svc.test': 'sftp-stop' } });
  await container.start();
  ({ gateway, port, user, registry } = await startTestGateway({ instance: { instanceId: INSTANCE, containerId: container.id }, docker }));
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await container?.remove({ force: true }).catch(() => undefined);
});

describe('stopping an instance with an SFTP read open', () => {
  it('closes the read, so the engine kills the container at once; the client is told, and opens no new read', async () => {
    const made = await container.exec({ Cmd: ['sh', '-c', 'seq 1 3000000 > /root/big'], AttachStdout: true, AttachStderr: true });
    const output = await made.start({});
    output.resume();
    await new Promise((r) => output.on('end', r));
    const client = new ssh2.Client();
    await new Promise<void>((resolve, reject) => client.on('ready', () => resolve()).on('error', reject).connect({ host: '127.0.0.1', port, username: INSTANCE, privateKey: user.privateKey }));
    try {
      const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
      const open = () => new Promise<Buffer>((resolve, reject) => sftp.open('/root/big', 'r', (err, h) => (err ? reject(err) : resolve(h))));
      const handle = await open();
      const read = (position: number) =>
        new Promise<number>((resolve, reject) => {
          const buffer = Buffer.alloc(4_096);
          sftp.read(handle, buffer, 0, buffer.length, position, (err, n) => (err ? reject(err) : resolve(n)));
        });
      // Slowly but steadily: well inside the idle limit that closes a stream nobody reads.
      let position = 0;
      let readError: Error | undefined;
      const reading = (async () => {
        try {
          for (;;) {
            position += await read(position);
            await new Promise((r) => setTimeout(r, READER_IDLE_MS / 10));
          }
        } catch (err) {
          readError = err as Error;
        }
      })();
      await new Promise((r) => setTimeout(r, READER_IDLE_MS / 2));
      expect(position).toBeGreaterThan(0);

      registry.drain(INSTANCE); // what the agent does once the instance is stopping
      const started = Date.now();
      await container.kill();
      expect(Date.now() - started).toBeLessThan(5_000);
      await reading;
      expect(readError?.message).toMatch(/stopping/);
      await expect(open().then(() => read(0))).rejects.toThrow();
    } finally {
      client.end();
    }
  }, 60_000);
});
