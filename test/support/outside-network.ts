// A stand-in for what lies beyond the host, for network isolation tests on a machine
// without internet: a network namespace behind a veth pair, routed from the host, that
// owns a "public" address (1.2.3.4), the cloud metadata address (169.254.169.254) and
// Azure's host endpoint (168.63.129.16), each answering HTTP on port 80 (and the greeting
// below on TCP port 53, where Azure's endpoint answers DNS). Traffic from containers to it takes the same path as
// real outbound traffic: FORWARD (DOCKER-USER first), then Docker's masquerade. For
// bandwidth tests the public address also serves a file of BIG_FILE_BYTES at /big and
// takes whatever is sent to its port 9 (discard). A mail server's greeting answers on its
// SMTP port (25) and its submission port (587).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run, type Run } from './openssh.js';

export const PUBLIC_ADDRESS = '1.2.3.4';
export const METADATA_ADDRESS = '169.254.169.254';
export const AZURE_HOST_ADDRESS = '168.63.129.16';
export const DNS_PORT = 53;
const ADDRESSES = [PUBLIC_ADDRESS, METADATA_ADDRESS, AZURE_HOST_ADDRESS];
export const BIG_FILE_BYTES = 10 * 1024 * 1024;
export const DISCARD_PORT = 9;
export const SMTP_PORTS = { relay: 25, submission: 587 } as const;

export interface OutsideNetwork {
  /** Body of GET / on either address; also in the mail ports' greeting. */
  body: string;
  /** The address the namespace's own connections to the host come from. */
  address: string;
  /** Runs a command inside the namespace: a client out on the internet. */
  exec(command: string[]): Promise<Run>;
  close(): Promise<void>;
}

async function must(cmd: string, args: string[]): Promise<void> {
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
}

export async function startOutsideNetwork(): Promise<OutsideNetwork> {
  const id = randomBytes(4).toString('hex');
  const ns = `svco-${id}`;
  const hostSide = `svcoh-${id}`;
  const nsSide = `svcon-${id}`;
  const octet = 1 + (parseInt(id.slice(0, 2), 16) % 250);
  const dir = mkdtempSync(join(tmpdir(), 'outside-'));
  const body = `outside ${id}`;
  writeFileSync(join(dir, 'index.html'), body);
  writeFileSync(join(dir, 'big'), Buffer.alloc(BIG_FILE_BYTES));
  writeFileSync(join(dir, 'discard.sh'), '#!/bin/sh\ncat > /dev/null\n', { mode: 0o755 });
  writeFileSync(join(dir, 'greet.sh'), `#!/bin/sh\nprintf '220 ${body} ESMTP\\r\\n'\n`, { mode: 0o755 });
  const servers: ChildProcess[] = [];
  const close = async (): Promise<void> => {
    for (const server of servers) server.kill('SIGKILL');
    for (const address of ADDRESSES) await run('ip', ['route', 'del', `${address}/32`, 'via', `10.254.${octet}.2`]);
    await run('ip', ['link', 'del', hostSide]);
    await run('ip', ['netns', 'del', ns]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await must('ip', ['netns', 'add', ns]);
    await must('ip', ['link', 'add', hostSide, 'type', 'veth', 'peer', 'name', nsSide, 'netns', ns]);
    await must('ip', ['addr', 'add', `10.254.${octet}.1/30`, 'dev', hostSide]);
    await must('ip', ['link', 'set', hostSide, 'up']);
    await must('ip', ['-n', ns, 'addr', 'add', `10.254.${octet}.2/30`, 'dev', nsSide]);
    for (const address of ADDRESSES) await must('ip', ['-n', ns, 'addr', 'add', `${address}/32`, 'dev', 'lo']);
    await must('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await must('ip', ['-n', ns, 'link', 'set', nsSide, 'up']);
    await must('ip', ['-n', ns, 'route', 'add', 'default', 'via', `10.254.${octet}.1`]);
    for (const address of ADDRESSES) await must('ip', ['route', 'replace', `${address}/32`, 'via', `10.254.${octet}.2`]);
    const inside = (command: string[]) => servers.push(spawn('ip', ['netns', 'exec', ns, ...command], { stdio: 'ignore' }));
    inside(['busybox', 'httpd', '-f', '-p', '80', '-h', dir]);
    inside(['busybox', 'nc', '-ll', '-p', String(DISCARD_PORT), '-e', join(dir, 'discard.sh')]);
    for (const port of [...Object.values(SMTP_PORTS), DNS_PORT]) inside(['busybox', 'nc', '-ll', '-p', String(port), '-e', join(dir, 'greet.sh')]);
  } catch (err) {
    await close();
    throw err;
  }
  return { body, address: `10.254.${octet}.2`, exec: (command) => run('ip', ['netns', 'exec', ns, ...command]), close };
}
