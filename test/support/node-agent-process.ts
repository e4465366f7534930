// Runs the real node agent (`node --import tsx node-agent/src/main.ts`) and svcctl as child
// processes for the end-to-end suites, capturing their output.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { REGISTRY } from './images.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface AgentProcess {
  child: ChildProcess;
  output(): string;
  /** Exit code (or signal name) once the process ended. */
  exited: Promise<number | string>;
}

/**
 * Test agents take free ports for SSH and Jupyter (several run at once) unless told otherwise.
 * Image garbage collection and disk pressure start only at a full disk (100%): the images a
 * test agent ran are the ones every suite sharing the engine uses, and a CI machine's disk
 * may well be 90% full without that being what a suite tests.
 */
/**
 * The connections an instance may hold through the host (SVC_TASK_MAX_CONNECTIONS) for
 * every agent the tests start. It lives in the host-wide firewall, which each agent
 * rewrites as it starts: one value for all keeps suites side by side from changing it
 * under each other. Low enough that a test can go past it with a few hundred flows.
 */
export const TEST_MAX_CONNECTIONS = 256;

export function spawnAgent(env: Record<string, string>): AgentProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'node-agent/src/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      SVC_LOG_LEVEL: 'info',
      SVC_SSH_PORT: '0',
      SVC_JUPYTER_PORT: '0',
      SVC_PULL_PROXY_PORT: '0',
      SVC_ACCESS_BIND_HOST: '127.0.0.1',
      SVC_IMAGE_GC_HIGH_PERCENT: '100',
      SVC_IMAGE_GC_LOW_PERCENT: '100',
      SVC_DISK_PRESSURE_PERCENT: '100',
      SVC_TASK_MAX_CONNECTIONS: String(TEST_MAX_CONNECTIONS),
      // The tests' images live in the loopback registry, the operator's own here.
      SVC_INSTANCE_PRIVATE_REGISTRIES: REGISTRY,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return { child, output: () => output, exited };
}

/**
 * Waits for `probe` while the agent starts; a timeout (or the agent exiting) fails with
 * what the agent printed, so a slow or crashed start says why.
 */
export async function whileAgentStarts<T>(agent: AgentProcess, probe: () => Promise<T | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const exited = agent.exited.then((code) => {
    throw new Error(`the agent exited (${code}) while waiting for ${what}`);
  });
  // An exit after the wait is over (the suite killing the agent) is nobody's error.
  exited.catch(() => undefined);
  try {
    return await Promise.race([eventually(probe, timeoutMs, what), exited]);
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- agent output ---\n${agent.output().slice(-4000)}`);
  }
}

/** Removes every container an agent of `nodeId` made (instances and replicas), whatever its state, and their networks. */
export async function removeNodeContainers(docker: Docker, nodeId: string): Promise<void> {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`svc.node=${nodeId}`] } })) {
    await docker.getContainer(c.Id).remove({ force: true });
  }
  // Each task has a network of its own; left behind they would use up Docker's address pools.
  for (const n of await docker.listNetworks({ filters: { label: [`svc.node=${nodeId}`] } })) {
    await docker.getNetwork(n.Id).remove().catch((err: { statusCode?: number }) => {
      if (err.statusCode !== 404) throw err;
    });
  }
}

const run = promisify(execFile);

/** `svcctl ARGS --json` against a data dir; returns the parsed JSON. */
export async function svcctlJson<T = Record<string, unknown>>(dataDir: string, ...args: string[]): Promise<T> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), ...args, '--json'], {
    cwd: ROOT,
    env: { ...process.env, SVC_DATA_DIR: dataDir },
  });
  return JSON.parse(stdout) as T;
}

/** A TCP port nothing listens on right now. */
/** Whether `port` can be listened on at `host` now. */
function bindable(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * A port free now, for a process to listen on a moment later. Taken below the kernel's
 * ephemeral range (32768 on): a port the kernel picked for a listen(0) or an outgoing
 * connection of the suites running beside this one could land on it in between (seen once:
 * a control plane's gRPC port taken, EADDRINUSE). Only callers of this can collide now, one
 * chance in thousands.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if ((await bindable(port, '0.0.0.0')) && (await bindable(port, '127.0.0.1'))) return port;
  }
  throw new Error('no free port between 20000 and 32000 after 100 tries');
}

/** Polls `probe` until it returns a value (not undefined/false); fails with `what` after `timeoutMs`. */
export async function eventually<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number, what: string, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
