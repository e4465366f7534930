// Installs the npm dependencies when they are missing or older than package-lock.json.
// Runs before `npm start`, `npm test` and `npm run bench`, so a fresh clone needs no
// separate install step. Plain Node: it must run before anything is installed.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Runs `npm <args>` in `dir` unless the stamp says its package-lock.json is already installed. */
function ensure(dir, label, args) {
  const lockFile = join(dir, 'package-lock.json');
  const stampFile = join(dir, 'node_modules', '.svc-deps-stamp');
  const lockHash = existsSync(lockFile) ? createHash('sha256').update(readFileSync(lockFile)).digest('hex') : 'no-lock';
  const installed = existsSync(stampFile) ? readFileSync(stampFile, 'utf8') : '';
  if (installed === lockHash) return;
  process.stderr.write(`deps: npm ${args[0]} in ${label} (first run or package-lock.json changed)\n`);
  execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: 'inherit' });
  writeFileSync(stampFile, lockHash);
}

ensure(root, '.', existsSync(join(root, 'package-lock.json')) ? ['ci'] : ['install']);

// cpu-engine/ is its own npm project (cpu-engine/README.md says why): node-llama-cpp
// without its ~640 MB of optional GPU binaries; the CPU one is an explicit dependency.
// Not `npm ci`: the registry lacks some of node-llama-cpp's optional platform
// packages, which `npm ci` counts as a lock file out of sync. `--no-save` keeps the
// lock file as committed; install scripts are not needed (prebuilt binaries).
ensure(join(root, 'cpu-engine'), 'cpu-engine', ['install', '--omit=optional', '--ignore-scripts', '--no-save']);

// Protocol types are generated, never committed.
await import('./gen-proto-types.mjs');
