// Logs a person can read: the real control plane and node agent processes write
// pino-pretty lines when stdout is a terminal (a pseudo-TTY from util-linux `script`) and
// JSON lines when it is a pipe; SVC_LOG_FORMAT forces either way.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, ROOT } from './support/node-agent-process.js';

const dir = mkdtempSync(join(tmpdir(), 'log-format-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ANSI = /\x1b\[[0-9;]*m/g;

/**
 * Runs `entry` (a TypeScript file) under node + tsx, on a pseudo-terminal or a pipe, until
 * its output contains `until`; then stops it (the whole process group) and returns the output.
 */
async function runUntil(entry: string, env: Record<string, string>, terminal: boolean, until: string): Promise<string> {
  const command = [process.execPath, '--import', 'tsx', join(ROOT, entry)];
  const child = terminal
    ? spawn('script', ['-qefc', command.join(' '), '/dev/null'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'], detached: true })
    : spawn(command[0]!, command.slice(1), { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  // stdout only (on a terminal, `script` carries stderr there too): the logs' stream.
  let output = '';
  let stderr = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await new Promise<void>((resolve, reject) => {
      const look = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes(until)) resolve();
      };
      child.stdout!.on('data', look);
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.once('exit', (code) => reject(new Error(`${entry} exited (${code}) before printing "${until}":\n${output}\n${stderr}`)));
    });
  } finally {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    await exited;
  }
  return output;
}

const logLines = (output: string) => output.split(/\r?\n/).filter((l) => l.trim() !== '');

async function controlPlane(terminal: boolean, format?: string): Promise<string> {
  const data = mkdtempSync(join(dir, 'cp-'));
  return runUntil(
    'test/support/control-plane-entry.ts',
    { SVC_DATA_DIR: data, SVC_HTTP_PORT: '0', SVC_GRPC_PORT: String(await freePort()), SVC_LOG_LEVEL: 'info', ...(format ? { SVC_LOG_FORMAT: format } : {}) },
    terminal,
    'control plane listening',
  );
}

async function agent(terminal: boolean, format?: string): Promise<string> {
  return runUntil(
    'node-agent/src/main.ts',
    {
      // Nothing listens there: the agent logs its start, then retries the connection.
      SVC_CONTROL_PLANE: `127.0.0.1:${await freePort()}`,
      SVC_AGENT_DATA_DIR: mkdtempSync(join(dir, 'agent-')),
      SVC_NODE_TOKEN: 'svc_nt_not_a_real_token',
      SVC_NVML_LIBRARY: join(dir, 'no-nvml.so'),
      SVC_SSH_PORT: '0',
      SVC_JUPYTER_PORT: '0',
      SVC_PULL_PROXY_PORT: '0',
      SVC_ACCESS_BIND_HOST: '127.0.0.1',
      SVC_LOG_LEVEL: 'info',
      ...(format ? { SVC_LOG_FORMAT: format } : {}),
    },
    terminal,
    'node agent starting',
  );
}

function expectPretty(output: string, message: string, name: string, colours: boolean): void {
  const line = logLines(output).find((l) => l.includes(message))!;
  expect(line, output).toBeDefined();
  // pino-pretty: "[HH:MM:ss.mmm] INFO (name): message", no JSON braces around it.
  expect(line.replace(ANSI, '')).toMatch(new RegExp(`^\\[\\d{2}:\\d{2}:\\d{2}\\.\\d{3}\\] INFO \\(${name}\\): ${message}`));
  expect(ANSI.test(line), `colours in: ${JSON.stringify(line)}`).toBe(colours);
  for (const l of logLines(output)) expect(l.trimStart().startsWith('{"level"'), l).toBe(false);
}

function expectJson(output: string, message: string, name: string): void {
  const entries = logLines(output).map((l) => JSON.parse(l) as { msg: string; name: string; level: number });
  expect(entries.find((e) => e.msg === message), output).toMatchObject({ name, level: 30 });
  expect(output).not.toMatch(ANSI);
}

/** Each case starts a real process under tsx; a loaded 2-core host makes that slow. */
const START_TIMEOUT_MS = 120_000;

describe('log format', () => {
  it('the control plane logs pretty, coloured lines on a terminal', async () => {
    expectPretty(await controlPlane(true), 'control plane listening', 'control-plane', true);
  }, START_TIMEOUT_MS);

  it('the control plane logs JSON lines to a pipe', async () => {
    expectJson(await controlPlane(false), 'control plane listening', 'control-plane');
  }, START_TIMEOUT_MS);

  it('SVC_LOG_FORMAT=json gives a terminal JSON (the node agent)', async () => {
    expectJson(await agent(true, 'json'), 'node agent starting', 'node-agent');
  }, START_TIMEOUT_MS);

  it('SVC_LOG_FORMAT=pretty gives a pipe pretty lines without colour codes (the node agent)', async () => {
    expectPretty(await agent(false, 'pretty'), 'node agent starting', 'node-agent', false);
  }, START_TIMEOUT_MS);
});
