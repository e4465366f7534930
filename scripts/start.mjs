// `npm start`: the control plane on http://127.0.0.1:8080 (data under ./data), and,
// once the node agent exists, a local agent connected to it. Ctrl-C stops everything.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const env = { ...process.env, SVC_DATA_DIR: process.env.SVC_DATA_DIR ?? join(root, 'data') };

const children = [];
function run(name, script) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, script)], { cwd: root, env, stdio: 'inherit' });
  child.on('exit', (code, signal) => {
    if (!stopping) {
      process.stderr.write(`${name} exited (${signal ?? code}); stopping\n`);
      stop(code ?? 1);
    }
  });
  children.push(child);
  return child;
}

let stopping = false;
function stop(code = 0) {
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  setTimeout(() => process.exit(code), 5000).unref();
  Promise.all(children.map((c) => (c.exitCode !== null ? null : new Promise((r) => c.once('exit', r))))).then(() => process.exit(code));
}

process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));

run('control plane', 'control-plane/src/server.ts');
