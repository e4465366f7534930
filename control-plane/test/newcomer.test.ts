// What a newcomer does: start the control plane, create a key with svcctl, call the API.
// Real processes (server and CLI), a real data dir, real HTTP.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'svc-newcomer-'));
const env = { ...process.env, SVC_DATA_DIR: dataDir, SVC_HTTP_PORT: '0', SVC_GRPC_PORT: '0', SVC_LOG_LEVEL: 'info' };

let server: ChildProcess;
let baseUrl: string;
let stderr = '';

function svcctl(...args: string[]): { code: number; stdout: string; stderr: string } {
  const res = spawnSync(process.execPath, [join(root, 'control-plane/bin/svcctl.js'), ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { code: res.status ?? -1, stdout: res.stdout, stderr: res.stderr };
}

async function eventually(check: () => Promise<boolean>, ms = 6000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  server = spawn(process.execPath, ['--import', 'tsx', join(root, 'control-plane/src/server.ts')], { env, cwd: root });
  server.stderr!.on('data', (chunk) => (stderr += String(chunk)));
  baseUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    server.stdout!.on('data', (chunk) => {
      out += String(chunk);
      const match = /"base_url":"([^"]+)"/.exec(out);
      if (match) resolve(match[1]!);
    });
    server.once('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
  });
}, 60_000);

afterAll(() => {
  if (server.exitCode === null) server.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

describe('a newcomer', () => {
  let key: string;
  let keyId: string;

  it('is told on first start how to create the first key', () => {
    expect(stderr).toContain('npx svcctl keys create');
  });

  it('creates a key with svcctl and lists models with curl-like HTTP', async () => {
    const created = svcctl('keys', 'create', '--json');
    expect(created.code).toBe(0);
    ({ key, key_id: keyId } = JSON.parse(created.stdout));
    expect(key).toMatch(/^svc_sk_live_/);

    const res = await fetch(`${baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; data: Array<{ id: string }> };
    expect(body.object).toBe('list');
    expect(body.data.map((m) => m.id)).toContain('bge-large-en-v1.5');
  });

  it('lists keys without their values, in a table or as JSON', () => {
    const json = svcctl('keys', 'list', '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).data.some((k: { key_id: string; last4: string }) => k.key_id === keyId && k.last4 === key.slice(-4))).toBe(true);
    expect(json.stdout).not.toContain(key);
    const table = svcctl('keys', 'list');
    expect(table.stdout).toContain(keyId);
    expect(table.stdout).toContain(`…${key.slice(-4)}`);
  });

  it("prints a tenant's text inert: a key name full of terminal escapes and bidirectional controls drives nothing in the operator's terminal", async () => {
    // What a tenant's own admin key may name its keys: set the window title, clear the
    // screen, write the clipboard (OSC 52), and reverse what follows.
    const admin = svcctl('keys', 'create', '--admin', '--json');
    expect(admin.code).toBe(0);
    const name = '\u001b]0;owned\u0007\u001b[2J\u001b]52;c;Y3VybCBldmlsfHNo\u0007\u009b31m\u202eok\r\nkey_fake';
    const res = await fetch(`${baseUrl}/v1/admin/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${JSON.parse(admin.stdout).key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });
    expect(res.status).toBe(201);
    const unsafe = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/;
    const table = svcctl('keys', 'list');
    expect(table.code).toBe(0);
    expect(table.stdout).not.toMatch(unsafe);
    expect(table.stdout).toContain('\\x1b]0;owned\\x07\\x1b[2J\\x1b]52;c;Y3VybCBldmlsfHNo\\x07\\x9b31m\\u202eok\\x0d\\x0akey_fake');
    // JSON keeps the name as it is, in JSON's own escapes.
    const json = svcctl('keys', 'list', '--json');
    expect(json.stdout).not.toMatch(unsafe);
    expect(JSON.parse(json.stdout).data.map((k: { name: string | null }) => k.name)).toContain(name);
  });

  it('sets an org IP allowlist that the running server enforces within seconds', async () => {
    expect(svcctl('orgs', 'set', 'default', '--ip-allowlist', '10.0.0.0/8').code).toBe(0);
    await eventually(async () => (await fetch(`${baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status === 403);
    expect(svcctl('orgs', 'set', 'default', '--ip-allowlist', '').code).toBe(0);
    await eventually(async () => (await fetch(`${baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status === 200);
  });

  it('gets clear errors from svcctl for bad input', () => {
    const cidr = svcctl('orgs', 'set', 'default', '--ip-allowlist', '999.1.1.1/8');
    expect(cidr.code).toBe(1);
    expect(cidr.stderr).toContain('ip_allowlist[0]');
    const scope = svcctl('keys', 'create', '--kind', 'public', '--scopes', 'compute:write');
    expect(scope.code).toBe(1);
    expect(scope.stderr).toContain('public keys may not carry compute:write');
    expect(svcctl('keys', 'revoke', 'key_nope').stderr).toContain('no API key with id key_nope');
  });

  it('revokes with svcctl and the running server refuses the key within seconds', async () => {
    const revoked = svcctl('keys', 'revoke', keyId, '--json');
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ key_id: keyId, revoked: true });
    await eventually(async () => (await fetch(`${baseUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status === 401);
  });

  it('shuts down cleanly on SIGTERM', async () => {
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    server.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});

describe('start-up with a bad setting', () => {
  it('stops with exit code 2 and names the setting', () => {
    const res = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'control-plane/src/server.ts')], {
      env: { ...env, SVC_HTTP_PORT: 'eighty' },
      encoding: 'utf8',
      cwd: root,
    });
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('SVC_HTTP_PORT');
  });
});
