// The real OpenSSH client (Debian's openssh-client) for end-to-end suites: key pairs
// made by ssh-keygen, a known_hosts file holding the host key an instance read reports,
// and ssh/scp/sftp runs that never read the user's own configuration or agent.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function run(cmd: string, args: string[], options: { input?: string | Buffer; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${cmd} ${args.join(' ')} ran past ${options.timeoutMs ?? 30_000} ms; stderr: ${stderr}`));
    }, options.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    // A child that exits without reading its input (a refused connection) makes the write
    // fail with EPIPE; its exit status already says what happened.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

export interface KeyPair {
  type: string;
  privateKey: string;
  publicKey: string;
}

export async function keygen(dir: string, name: string, type: 'ed25519' | 'ecdsa' | 'rsa'): Promise<KeyPair> {
  const privateKey = join(dir, name);
  const made = await run('ssh-keygen', ['-q', '-t', type, ...(type === 'rsa' ? ['-b', '3072'] : []), '-N', '', '-C', `${name}@e2e`, '-f', privateKey]);
  if (made.code !== 0) throw new Error(`ssh-keygen failed: ${made.stderr}`);
  return { type, privateKey, publicKey: readFileSync(`${privateKey}.pub`, 'utf8').trim() };
}

export interface SshTarget {
  host: string;
  port: number;
  user: string;
  knownHosts: string;
}

/** A known_hosts file with exactly the host key an instance read reports. */
export function knownHostsFor(dir: string, name: string, ssh: { host: string; port: number; host_key: string }): string {
  const path = join(dir, `${name}.known_hosts`);
  writeFileSync(path, `[${ssh.host}]:${ssh.port} ${ssh.host_key}\n`);
  return path;
}

/** Options every client run shares: no user config, no agent, only this key, strict host key checking. */
export function clientOptions(target: SshTarget, key: KeyPair): string[] {
  return [
    '-F', '/dev/null',
    '-i', key.privateKey,
    '-o', 'IdentitiesOnly=yes',
    '-o', 'IdentityAgent=none',
    '-o', 'BatchMode=yes',
    '-o', 'StrictHostKeyChecking=yes',
    '-o', `UserKnownHostsFile=${target.knownHosts}`,
    '-o', 'GlobalKnownHostsFile=/dev/null',
    '-o', 'LogLevel=ERROR',
  ];
}

export const ssh = (target: SshTarget, key: KeyPair, args: string[], options: { input?: string | Buffer; timeoutMs?: number; sshOptions?: string[] } = {}): Promise<Run> =>
  run('ssh', ['-p', String(target.port), ...clientOptions(target, key), ...(options.sshOptions ?? []), `${target.user}@${target.host}`, ...args], options);

/** A long-running ssh (a session held open, a port forward), to be killed by the test. */
export function sshProcess(target: SshTarget, key: KeyPair, args: string[], sshOptions: string[] = []): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn('ssh', ['-p', String(target.port), ...clientOptions(target, key), ...sshOptions, `${target.user}@${target.host}`, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

export const scp = (target: SshTarget, key: KeyPair, from: string, to: string): Promise<Run> =>
  run('scp', ['-P', String(target.port), ...clientOptions(target, key), from, to], { timeoutMs: 60_000 });

export const sftp = (target: SshTarget, key: KeyPair, batch: string): Promise<Run> =>
  run('sftp', ['-P', String(target.port), ...clientOptions(target, key), '-b', '-', `${target.user}@${target.host}`], { input: batch, timeoutMs: 60_000 });

export const remote = (target: SshTarget, path: string): string => `${target.user}@${target.host}:${path}`;
