// The outbox survives a crash: a control plane killed with SIGKILL between the change
// and the delivery delivers after restart, and a change made by svcctl while no server
// runs is delivered when one starts. Real processes, data dir and HTTP; svcctl
// webhooks commands are exercised on the same data dir.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildServices } from '../src/app.js';
import { loadControlPlaneConfig } from '../src/config.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { WebhookReceiver, until } from './webhooks-support.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), 'svc-webhooks-crash-'));
const env = { ...process.env, SVC_DATA_DIR: dataDir, SVC_HTTP_PORT: '0', SVC_GRPC_PORT: '0', SVC_LOG_LEVEL: 'info', SVC_WEBHOOK_POLL_MS: '50', SVC_WEBHOOK_ALLOWED_TARGETS: '127.0.0.1' };

const servers: ChildProcess[] = [];
let receiver: WebhookReceiver | undefined;
afterAll(async () => {
  for (const s of servers) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL');
  await receiver?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Runs svcctl as its own process; parses stdout when --json is given. */
function svcctl(...args: string[]): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'control-plane/bin/svcctl.js'), ...args], { env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += String(chunk)));
    child.stderr.on('data', (chunk) => (stderr += String(chunk)));
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`svcctl ${args.join(' ')} exited ${code}: ${stderr}`));
      resolve(args.includes('--json') ? JSON.parse(stdout) : stdout);
    });
  });
}

/** Creates keys the way svcctl does (same store and services), without a process each. */
async function createKeys(): Promise<{ admin: string; targets: string[] }> {
  const store = openSqliteStore(dataDir);
  try {
    const services = buildServices({ config: loadControlPlaneConfig(env), store });
    const { org } = await services.orgs.ensureDefaultOrg();
    const admin = (await services.keys.create({ orgId: org.id, admin: true })).value;
    const targets = [(await services.keys.create({ orgId: org.id })).record.id, (await services.keys.create({ orgId: org.id })).record.id];
    return { admin, targets };
  } finally {
    await store.close();
  }
}

async function startServer(): Promise<{ process: ChildProcess; baseUrl: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'control-plane/src/server.ts')], { env, cwd: root });
  servers.push(child);
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += String(chunk)));
  const baseUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk) => {
      out += String(chunk);
      const match = /"base_url":"([^"]+)"/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
  });
  return { process: child, baseUrl };
}

async function api(baseUrl: string, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe('webhook delivery across a crash', () => {
  let webhookId: string;
  let revoked: string[];
  let admin: string;
  let baseUrl: string;

  it('delivers an event whose delivery was cut by SIGKILL, and one written while no server ran', async () => {
    const keys = await createKeys();
    admin = keys.admin;
    revoked = keys.targets;
    const [first, second] = revoked as [string, string];
    receiver = await WebhookReceiver.start();
    receiver.answer = () => 'hang';

    const a = await startServer();
    const created = await api(a.baseUrl, admin, 'POST', '/v1/webhooks', { url: receiver.url, event_types: ['key.revoked'] });
    expect(created.status).toBe(201);
    webhookId = created.body.id;
    receiver.secrets = [created.body.secret];
    expect((await api(a.baseUrl, admin, 'POST', `/v1/admin/keys/${first}/revoke`, {})).status).toBe(200);
    // The change is committed and its delivery is on the wire, unanswered: crash now.
    await until('the first attempt reaches the receiver', () => receiver!.requests.length === 1);
    a.process.kill('SIGKILL');
    await new Promise((r) => a.process.once('exit', r));

    // A change made while no control plane runs waits in the outbox.
    await svcctl('keys', 'revoke', second, '--json');
    receiver.answer = () => ({ status: 200 });

    baseUrl = (await startServer()).baseUrl;
    await until('both events delivered', () => new Set(receiver!.delivered().map((r) => r.event.data.key_id)).size === 2, 15_000);
    const byKey = (keyId: string) => receiver!.requests.filter((r) => r.event.data.key_id === keyId);
    expect(byKey(first).length).toBe(2);
    expect(byKey(first)[0]!.webhookId).toBe(byKey(first)[1]!.webhookId);
    expect(byKey(first)[1]!.answered).toBe(200);
    expect(byKey(second).map((r) => r.answered)).toEqual([200]);
    expect(receiver.requests.every((r) => r.verifiedWith.length === 1)).toBe(true);
    // Two control-plane starts and an svcctl process, each a Node + tsx start-up.
  }, 120_000);

  it('svcctl webhooks shows, lists, rotates, redelivers and deletes on the same data dir', async () => {
    await until('both attempts recorded', async () => {
      const res = await api(baseUrl, admin, 'GET', `/v1/webhooks/${webhookId}/deliveries`);
      return res.body.data.length === 2 && res.body.data.every((d: { status: string }) => d.status === 'succeeded');
    });
    const [list, shown, listed, table] = await Promise.all([
      svcctl('webhooks', 'list', '--json'),
      svcctl('webhooks', 'show', webhookId, '--json'),
      svcctl('webhooks', 'deliveries', webhookId, '--json'),
      svcctl('webhooks', 'deliveries', webhookId),
    ]);
    expect(list.data.map((w: { id: string }) => w.id)).toEqual([webhookId]);
    expect(JSON.stringify(list)).not.toContain('whsec_');
    expect(shown).toMatchObject({ id: webhookId, status: 'enabled', event_types: ['key.revoked'] });
    const deliveries = listed.data as any[];
    expect(deliveries.map((d) => d.subject).sort()).toEqual([...revoked].sort());
    expect(deliveries.every((d) => d.status === 'succeeded')).toBe(true);
    expect(table).toContain('HTTP 200');

    const rotated = await svcctl('webhooks', 'rotate-secret', webhookId, '--overlap-seconds', '300', '--json');
    expect(rotated.secret).toMatch(/^whsec_/);
    receiver!.secrets = [receiver!.secrets[0]!, rotated.secret];

    // The running server picks up a redelivery requested from the CLI, signed by both secrets.
    const before = receiver!.requests.length;
    const target = deliveries[0];
    expect(await svcctl('webhooks', 'redeliver', webhookId, target.id, '--json')).toMatchObject({ id: target.id, status: 'pending' });
    await until('redelivered', () => receiver!.requests.length === before + 1, 10_000);
    const again = receiver!.requests.at(-1)!;
    expect(again.webhookId).toBe(target.event_id);
    expect(again.verifiedWith).toEqual(receiver!.secrets);

    expect(await svcctl('webhooks', 'delete', webhookId, '--json')).toMatchObject({ id: webhookId, object: 'webhook', deleted: true });
    expect((await api(baseUrl, admin, 'GET', '/v1/webhooks')).body.data).toEqual([]);
  }, 120_000);
});
