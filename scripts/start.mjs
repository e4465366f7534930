// `npm start`: the control plane on http://127.0.0.1:8080 (data under ./data), plus one
// local node agent connected to it over gRPC (127.0.0.1:7070). On a fresh data dir the
// agent is enrolled automatically: once the control plane listens, this script makes an
// enrollment token with `svcctl nodes token create` and hands it to the agent, which
// stores its node identity under <data dir>/agent. Without NVIDIA GPUs the agent reports
// zero GPUs (or SVC_SIMULATE_GPUS=<count>[x<name>] simulates some). First the host is
// prepared (Docker, loopback registry, the CPU engine image) so the default model replicas
// can run; SVC_SETUP_HOST=false skips that. SVC_LOCAL_AGENT=false starts the control plane
// alone. Ctrl-C stops everything.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = process.env.SVC_DATA_DIR ?? join(root, 'data');
const grpcPort = Number(process.env.SVC_GRPC_PORT ?? 7070);
const agentDataDir = process.env.SVC_AGENT_DATA_DIR ?? join(dataDir, 'agent');
const env = { ...process.env, SVC_DATA_DIR: dataDir };

/**
 * SVC_SIMULATE_GPUS=<count> without a name simulates the GPU model of the SKU catalog's
 * first SKU, so a newcomer's simulated GPUs are ones the catalog sells.
 */
function simulatedGpus() {
  const value = process.env.SVC_SIMULATE_GPUS;
  if (!value || !/^\d+$/.test(value.trim())) return {};
  const catalogPath = process.env.SVC_SKU_CATALOG || join(root, 'control-plane', 'catalog', 'skus.json');
  const model = JSON.parse(readFileSync(catalogPath, 'utf8')).skus?.[0]?.gpu_model;
  return model ? { SVC_SIMULATE_GPUS: `${value.trim()}x${model}` } : {};
}

const children = [];
let stopping = false;

function run(name, script, childEnv, { essential }) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, script)], { cwd: root, env: childEnv, stdio: 'inherit' });
  child.on('exit', (code, signal) => {
    if (stopping) return;
    if (essential) {
      process.stderr.write(`${name} exited (${signal ?? code}); stopping\n`);
      stop(code ?? 1);
    } else {
      process.stderr.write(`${name} exited (${signal ?? code}); the control plane keeps running\n`);
    }
  });
  children.push(child);
  return child;
}

function stop(code = 0) {
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  setTimeout(() => process.exit(code), 5000).unref();
  Promise.all(children.map((c) => (c.exitCode !== null ? null : new Promise((r) => c.once('exit', r))))).then(() => process.exit(code));
}

process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));

/** Resolves once something accepts TCP connections on 127.0.0.1:port. */
async function waitForPort(port, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (stopping) throw new Error('stopping');
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A fresh one-time enrollment token from the local control plane's data dir. */
async function createNodeToken() {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', join(root, 'control-plane/src/cli/svcctl.ts'), 'nodes', 'token', 'create', '--ttl', '1h', '--json'],
    { cwd: root, env },
  );
  return JSON.parse(stdout).token;
}

async function startLocalAgent() {
  await waitForPort(grpcPort, 60_000);
  const agentEnv = {
    ...env,
    SVC_CONTROL_PLANE: process.env.SVC_CONTROL_PLANE ?? `127.0.0.1:${grpcPort}`,
    ...simulatedGpus(),
    SVC_AGENT_DATA_DIR: agentDataDir,
    // A laptop's `npm start` keeps the SSH gateway and Jupyter proxy to itself unless told otherwise.
    SVC_ACCESS_BIND_HOST: process.env.SVC_ACCESS_BIND_HOST ?? '127.0.0.1',
    // Instances may use the images setup-host.sh puts in the loopback registry.
    SVC_INSTANCE_PRIVATE_REGISTRIES: process.env.SVC_INSTANCE_PRIVATE_REGISTRIES ?? '127.0.0.1:5000',
  };
  if (!existsSync(join(agentDataDir, 'identity.json')) && !process.env.SVC_NODE_TOKEN) {
    agentEnv.SVC_NODE_TOKEN = await createNodeToken();
    process.stderr.write(`Enrolling the local node agent (identity goes to ${agentDataDir}).\n`);
  }
  run('node agent', 'node-agent/src/main.ts', agentEnv, { essential: false });
}

/**
 * The Docker engine, the loopback registry and the images the local agent runs (the CPU
 * engine serving the tiny models, the sleeper test image): scripts/setup-host.sh, the
 * same idempotent script `npm test` runs. Without it (not root, no apt) the control plane
 * and the agent still start; they just cannot run containers.
 */
function prepareHost() {
  if (/^(false|0|no|off)$/i.test(process.env.SVC_SETUP_HOST ?? '')) return;
  const setup = spawnSync('bash', [join(root, 'scripts/setup-host.sh')], { cwd: root, stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' });
  if (setup.status === 0) return;
  process.stderr.write(`${setup.stderr ?? ''}`);
  process.stderr.write(
    'warning: Docker, the loopback registry or the model-server image could not be prepared (above);\n' +
      '         the control plane and the agent start anyway, but no model server or instance can run.\n' +
      '         Fix it with `sudo bash scripts/setup-host.sh`, then restart.\n',
  );
}

prepareHost();
run('control plane', 'control-plane/src/server.ts', env, { essential: true });
if (!/^(false|0|no|off)$/i.test(process.env.SVC_LOCAL_AGENT ?? '')) {
  startLocalAgent().catch((err) => {
    if (stopping) return;
    process.stderr.write(`could not start the local node agent: ${err.message}\n`);
  });
}
