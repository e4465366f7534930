// A second Docker engine beside the one the tests share, for what must be set in dockerd's
// own environment (its HTTP_PROXY/HTTPS_PROXY) and so cannot be changed on the shared one.
// It only pulls: a bridge of its own (made here: dockerd told `--bridge=none` deletes
// docker0, the shared engine's), no iptables, the vfs storage driver, the shared engine's
// containerd under a namespace of its own, everything else under a temporary directory.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';

export interface SecondDockerd {
  docker: Docker;
  stop(): Promise<void>;
}

export interface TestBridge {
  name: string;
  /** The bridge's own address, on this host but not loopback (dockerd sends loopback past any proxy). */
  address: string;
  remove(): Promise<void>;
}

/** A Linux bridge with one address from 198.18.0.0/15 (the range set aside for tests of network devices). */
export async function makeTestBridge(): Promise<TestBridge> {
  const n = process.pid % 250;
  const name = `svc-d2-${n}`;
  const address = `198.18.${n}.1`;
  await run('ip', ['link', 'del', name]).catch(() => undefined); // a run that died before removing it
  await run('ip', ['link', 'add', name, 'type', 'bridge']);
  await run('ip', ['addr', 'add', `${address}/24`, 'dev', name]);
  await run('ip', ['link', 'set', name, 'up']);
  return { name, address, remove: () => run('ip', ['link', 'del', name]).catch(() => undefined) };
}

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')}: ${stderr.trim()}`))));
  });
}

const SHARED_CONTAINERD = '/var/run/docker/containerd/containerd.sock';

export async function startSecondDockerd(options: { env: Record<string, string>; bridge: TestBridge; insecureRegistries: string[] }): Promise<SecondDockerd> {
  const dir = mkdtempSync(join(tmpdir(), 'dockerd2-'));
  const socketPath = join(dir, 'docker.sock');
  const args = [
    `--host=unix://${socketPath}`,
    `--data-root=${join(dir, 'data')}`,
    `--exec-root=${join(dir, 'exec')}`,
    `--pidfile=${join(dir, 'docker.pid')}`,
    `--bridge=${options.bridge.name}`,
    '--iptables=false',
    '--ip-forward=false',
    '--ip6tables=false',
    '--ip-masq=false',
    '--storage-driver=vfs',
    `--containerd=${SHARED_CONTAINERD}`,
    '--containerd-namespace=svc-test-dockerd2',
    '--containerd-plugins-namespace=svc-test-dockerd2-plugins',
    ...options.insecureRegistries.map((r) => `--insecure-registry=${r}`),
  ];
  // Only what is given: the test runner's own proxy variables must not leak in.
  const env = { PATH: `${process.env.PATH ?? ''}:/usr/sbin:/sbin`, ...options.env };
  const child: ChildProcess = spawn('dockerd', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const docker = new Docker({ socketPath });
  const stop = async (): Promise<void> => {
    child.kill('SIGTERM');
    const killed = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(killed);
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`the second dockerd exited at start: ${stderr}`);
    }
    try {
      await docker.ping();
      return { docker, stop };
    } catch {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`the second dockerd did not answer within 30 s: ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
