// The project's HAProxy example (deploy/haproxy/control-plane.cfg) run for real, with only
// its deployment-specific lines replaced: the `bind` line and one `server` line per
// replica. Everything a provider is told to use as it is stays as shipped.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, ROOT } from './node-agent-process.js';

const LB_CONFIG = join(ROOT, 'deploy/haproxy/control-plane.cfg');

export interface LoadBalancer {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** The shipped config with `bind` and the `server` lines replaced. */
export function loadBalancerConfig(bind: string, httpPorts: number[]): string {
  const lines = readFileSync(LB_CONFIG, 'utf8').split('\n');
  const firstServer = lines.findIndex((l) => /^\s*server\s/.test(l));
  const out = lines.filter((l) => !/^\s*server\s/.test(l)).map((l) => (/^\s*bind\s/.test(l) ? `    bind ${bind}` : l));
  out.splice(firstServer, 0, ...httpPorts.map((p, i) => `    server cp${i + 1} 127.0.0.1:${p} check`));
  return out.join('\n');
}

function haproxyBinary(): string {
  for (const candidate of ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy']) if (existsSync(candidate)) return candidate;
  throw new Error('haproxy not found: run `bash scripts/setup-host.sh` (installs the Debian haproxy package)');
}

/**
 * Starts HAProxy on `bind` (e.g. `127.0.0.1:8080`) in front of the replicas' HTTP ports and
 * resolves once `url` answers /readyz through it.
 */
export async function startLoadBalancer(dir: string, bind: string, url: string, httpPorts: number[]): Promise<LoadBalancer> {
  const configFile = join(dir, 'haproxy.cfg');
  writeFileSync(configFile, loadBalancerConfig(bind, httpPorts));
  const child = spawn(haproxyBinary(), ['-db', '-f', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  };
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null) throw new Error(`haproxy exited (${child.exitCode})`);
        return (await fetch(`${url}/readyz`)).status === 200;
      },
      20_000,
      'HAProxy to answer /readyz',
    );
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n--- haproxy ---\n${output}`);
  }
  return { url, process: child, stop };
}
