// svcctl answers from a laptop in well under a second only if it loads none of the
// server's libraries: the config schema library alone is some 250 modules, the logger,
// gRPC and the database drivers more. This runs the real CLI with a loader hook that
// records every module it loads, and holds the list to the CLI's own needs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const svcctl = fileURLToPath(new URL('./svcctl.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'svcctl-startup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The URLs of every module `svcctl <args>` loads. */
function modulesLoadedBy(args: string[]): string[] {
  const log = join(dir, `loaded-${args.join('-')}.txt`);
  const hook = join(dir, 'record-hook.mjs');
  writeFileSync(hook, `import { appendFileSync } from 'node:fs';\nexport async function load(url, context, next) { appendFileSync(${JSON.stringify(log)}, url + '\\n'); return next(url, context); }\n`);
  const register = join(dir, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hook).href)});\n`);
  execFileSync(process.execPath, ['--import', 'tsx', '--import', register, svcctl, ...args], { stdio: 'pipe', env: { ...process.env, SVC_LOG_LEVEL: 'silent' } });
  return readFileSync(log, 'utf8').trim().split('\n');
}

describe('svcctl start-up', () => {
  it.each([[['--help']], [['why', '--help']], [['nodes', 'list', '--help']]])('svcctl %j loads no server library', (args) => {
    const loaded = modulesLoadedBy(args);
    expect(loaded.some((url) => url.endsWith('/cli/program.ts'))).toBe(true);
    const heavy = loaded.filter((url) => /node_modules\/(@sinclair\/typebox|pino|pino-pretty|@grpc|protobufjs|better-sqlite3|pg|fastify|undici|dockerode)\//.test(url) || /\/(store|app|config)\.ts$/.test(url));
    expect(heavy).toEqual([]);
    // The CLI's own code plus a few libraries (commander, cli-table3, ipaddr.js): tens of modules, not hundreds.
    expect(loaded.length).toBeLessThan(80);
  });
});
