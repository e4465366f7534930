// Installs the npm dependencies when they are missing or older than package-lock.json.
// Runs before `npm start`, `npm test` and `npm run bench`, so a fresh clone needs no
// separate install step. Plain Node: it must run before anything is installed.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lockFile = join(root, 'package-lock.json');
const stampFile = join(root, 'node_modules', '.svc-deps-stamp');

const lockHash = existsSync(lockFile) ? createHash('sha256').update(readFileSync(lockFile)).digest('hex') : 'no-lock';
const installed = existsSync(stampFile) ? readFileSync(stampFile, 'utf8') : '';

if (installed !== lockHash) {
  const args = existsSync(lockFile) ? ['ci'] : ['install'];
  process.stderr.write(`deps: npm ${args[0]} (first run or package-lock.json changed)\n`);
  execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd: root, stdio: 'inherit' });
  writeFileSync(stampFile, lockHash);
}

// Protocol types are generated, never committed.
await import('./gen-proto-types.mjs');
