// svcctl from a laptop: a separate process with its own HOME and no data dir, talking to
// a running control plane (real agent, fake-NVML GPUs, real Docker) through the operator
// API with an operator key from a named context. Every read command prints the same as
// svcctl on the control-plane host's data dir; every write command works and is audited
// under the operator key that made it; `instances show --watch` draws the pull from an
// instance still provisioning.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '@svc/proto';
import { runCli } from '../control-plane/src/cli/program.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';
import { eventually, ROOT } from './support/node-agent-process.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let stack: InstanceStack;
const laptopHome = mkdtempSync(join(tmpdir(), 'svcctl-laptop-'));
const hostHome = mkdtempSync(join(tmpdir(), 'svcctl-host-'));
let operatorKey: string;
let operatorKeyId: string;
let instanceId: string;
/** A webhook of the default org, for `webhooks show`. */
let hookId: string;

function svcctl(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), ...args],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 240_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr: stderr + (err?.signal ? `[svcctl ended by ${err.signal}]` : '') }),
    );
  });
}

/** svcctl as a process whose stdout is read while it runs (for --watch). */
function svcctlLive(args: string[], env: Record<string, string>): { stdout: () => string; done: Promise<Run> } {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const done = new Promise<Run>((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr: stderr + (signal ? `[svcctl ended by ${signal}]` : '') });
    }),
  );
  return { stdout: () => stdout, done };
}

/** The laptop: its own HOME (the context file lives there), no data dir anywhere near. */
const remote = (...args: string[]) => svcctl(args, { HOME: laptopHome });
/** The control-plane host: svcctl on the data dir, as a process. */
const onHost = (...args: string[]) => svcctl(['--data-dir', join(stack.dir, 'cp'), ...args], { HOME: hostHome });

/**
 * The same on the data dir, run in this process to keep the suite fast (the laptop side,
 * the one under test, is always a separate process). Output is captured from the writes.
 */
async function local(...args: string[]): Promise<Run> {
  const out = { stdout: '', stderr: '' };
  const write = { stdout: process.stdout.write, stderr: process.stderr.write };
  const capture = (stream: 'stdout' | 'stderr') =>
    ((chunk: string | Uint8Array) => {
      out[stream] += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture('stdout');
  process.stderr.write = capture('stderr');
  try {
    const code = await runCli(['--data-dir', join(stack.dir, 'cp'), ...args]);
    return { code: code || Number(process.exitCode ?? 0), ...out };
  } finally {
    process.stdout.write = write.stdout;
    process.stderr.write = write.stderr;
    process.exitCode = undefined;
  }
}
const json = (run: Run) => {
  if (run.code !== 0) throw new Error(`svcctl failed (${run.code}): ${run.stderr}`);
  return JSON.parse(run.stdout);
};

/** What changes between two reads a moment apart: how long ago things were seen, live GPU samples. */
function steady(text: string): string {
  return text
    // "9s ago" and "10s ago" pad a table cell differently; the padding goes with the number.
    .replace(/\d+[smhd] ago */g, 'N ago ')
    .replace(/"(last_seen_seconds_ago|last_seen_at|sampled_at)": [^,\n]+/g, '"$1": X')
    .replace(/(Last seen\s+).*/g, '$1X');
}

beforeAll(async () => {
  stack = await startInstanceStack({ name: 'svcctl-remote', gpus: 2 });
  // Bootstrapping on the host: the first operator key comes from the data dir.
  const created = json(await onHost('operators', 'keys', 'create', '--scope', 'operator:write', '--name', 'on-call laptop', '--json'));
  operatorKey = created.key;
  operatorKeyId = created.id;
  const added = await remote('context', 'add', 'lab', '--url', stack.cp.baseUrl, '--key', operatorKey);
  expect(added.stdout, added.stderr).toContain('is current');
  const { org } = await stack.cp.app.services.orgs.ensureDefaultOrg();
  hookId = (await stack.cp.app.services.webhooks.create({ orgId: org.id, url: 'http://127.0.0.1:9/ops-hook', eventTypes: ['model.deprecation_announced'], description: 'read by svcctl' })).subscription.id;
}, 240_000);

afterAll(async () => {
  await stack?.close();
  rmSync(laptopHome, { recursive: true, force: true });
  rmSync(hostHome, { recursive: true, force: true });
});

describe('svcctl on a laptop', () => {
  it('keeps the operator key in a 0600 file under its own HOME', async () => {
    const path = join(laptopHome, '.config', 'svcctl', 'config.json');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const listed = await remote('context', 'list');
    expect(listed.stdout).toContain(stack.cp.baseUrl);
    expect(listed.stdout).not.toContain(operatorKey);
  });

  it('follows the instance with --watch from provisioning until it is ready, over the operator API', async () => {
    // The start order is held back until the watch has drawn the instance still
    // provisioning: a watch loop that never polls (or never draws) fails here.
    const dispatcher = stack.cp.app.services.taskDispatcher;
    const startTask = dispatcher.startTask;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    dispatcher.startTask = (nodeId, order) => {
      void held.then(() => startTask.call(dispatcher, nodeId, order));
      return true;
    };
    let watch: ReturnType<typeof svcctlLive> | undefined;
    try {
      const instance = await stack.create({ image: SLEEPER_IMAGE, labels: { team: 'ml' } });
      expect(instance.status, JSON.stringify(instance.body)).toBe(201);
      instanceId = instance.body.id;
      watch = svcctlLive(['instances', 'show', instanceId, '--watch'], { HOME: laptopHome });
      // Not a TTY: one line per poll, `provisioning [????…]  provisioning` while nothing is known.
      await eventually(() => (/^provisioning +\[/m.test(watch!.stdout()) ? true : undefined), 60_000, 'the watch to draw the instance provisioning', 100);
      expect((await stack.read(instanceId)).status).toBe('provisioning');
    } finally {
      dispatcher.startTask = startTask;
      release();
    }
    const watched = await watch!.done;
    expect(watched.code, watched.stderr).toBe(0);
    const polls = watched.stdout.split('\n').filter((l) => /^(provisioning|starting) +\[/.test(l));
    expect(polls.length, watched.stdout).toBeGreaterThanOrEqual(1);
    for (const line of polls) expect(line).toMatch(/^(provisioning|starting) +\[([?]{30}\]  \w+|[#-]{30}\] +\d+%  \w+)$/);
    // Then the final table, once: the instance ready.
    expect(watched.stdout.indexOf('┌')).toBeGreaterThan(watched.stdout.lastIndexOf(polls.at(-1)!));
    expect(watched.stdout).toMatch(/status\s+│\s+ready/);
    expect(watched.stdout).toContain('team=ml');
  }, 120_000);

  it('prints what svcctl prints on the host for every read command', async () => {
    const node = stack.nodeId;
    const reads: string[][] = [
      ['orgs', 'list'],
      ['orgs', 'show', 'default'],
      ['keys', 'list'],
      ['nodes', 'list'],
      ['nodes', 'show', node],
      ['nodes', 'timeline', node],
      ['nodes', 'gpus'],
      ['nodes', 'free-gpus', '--model', 'NVIDIA H100 80GB HBM3'],
      ['nodes', 'token', 'list'],
      ['instances', 'list'],
      ['instances', 'show', instanceId],
      ['replicas', 'list', '--all'],
      ['webhooks', 'list'],
      ['webhooks', 'show', hookId],
      ['billing', 'show', 'default'],
      ['operators', 'keys', 'list'],
    ];
    const runs = reads.flatMap((args) => [args, [...args, '--json']]);
    // Laptop processes a few at a time; each is compared with the host's answer read just after.
    for (let i = 0; i < runs.length; i += 4) {
      const batch = runs.slice(i, i + 4);
      const there = await Promise.all(batch.map((args) => remote(...args)));
      for (const [j, args] of batch.entries()) {
        const here = await local(...args);
        expect(there[j]!.code, `${args.join(' ')}: ${there[j]!.stderr}`).toBe(0);
        expect(steady(there[j]!.stdout), `svcctl ${args.join(' ')}`).toBe(steady(here.stdout));
      }
    }
    // And the same refusal, word for word.
    const there = await remote('nodes', 'forget', node);
    const here = await local('nodes', 'forget', node);
    expect(there.code).toBe(1);
    expect(there.stderr).toMatch(/can be forgotten after/);
    expect(steady(there.stderr)).toBe(steady(here.stderr));
  }, 600_000);

  it('drives every write command remotely, each audited under the operator key', async () => {
    const [org, token, reader] = (await Promise.all([
      remote('orgs', 'create', 'acme', '--tier', '3', '--json'),
      remote('nodes', 'token', 'create', '--pool', 'eu', '--ttl', '1h', '--json'),
      remote('operators', 'keys', 'create', '--scope', 'operator:read', '--name', 'dashboard', '--json'),
    ])).map(json);
    expect(token.token).toBeTruthy();
    const [updated, key, revokedToken, refused] = await Promise.all([
      remote('orgs', 'set', 'acme', '--ip-allowlist', '10.0.0.0/8', '--gpu-quota', '16', '--json'),
      remote('keys', 'create', '--org', 'acme', '--scopes', 'compute:read', '--json'),
      remote('nodes', 'token', 'revoke', token.id, '--json'),
      svcctl(['--url', stack.cp.baseUrl, 'orgs', 'create', 'nope'], { HOME: laptopHome, SVC_OPERATOR_KEY: reader.key }),
    ]);
    expect(json(updated)).toMatchObject({ ip_allowlist: ['10.0.0.0/8'], gpu_quota: 16 });
    expect(json(key).org_id).toBe(org.id);
    expect(json(revokedToken).state).toBe('revoked');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/lacks the operator:write scope/);

    const keyId = json(key).key_id;
    const [rotated, hook, readerRevoked] = (await Promise.all([
      remote('keys', 'rotate', keyId, '--overlap-seconds', '0', '--json'),
      remote('webhooks', 'create', '--org', 'acme', '--url', 'http://127.0.0.1:9/hook', '--events', 'key.revoked', '--json'),
      remote('operators', 'keys', 'revoke', reader.id, '--json'),
    ])).map(json);
    expect(rotated.key).not.toBe(json(key).key);
    expect(hook.secret).toMatch(/^whsec_/);
    expect(readerRevoked.revoked).toBe(true);
    expect(json(await remote('keys', 'revoke', keyId, '--json')).revoked).toBe(true);
    // The revocation event reaches acme's webhook (a closed port): its delivery can be sent again.
    const delivery = await eventually(
      async () => (await stack.cp.app.services.webhooks.deliveries(hook.id, { limit: 5 })).find((d) => d.attempts.length > 0),
      30_000,
      'a delivery attempt to the webhook',
      200,
    );
    const [redelivered, resecret, shown] = await Promise.all([
      remote('webhooks', 'redeliver', hook.id, delivery.delivery.id),
      remote('webhooks', 'rotate-secret', hook.id, '--json'),
      remote('webhooks', 'deliveries', hook.id),
    ]);
    expect(redelivered.stdout).toContain('is pending again');
    expect(json(resecret).secret).not.toBe(hook.secret);
    expect(shown.stdout).toContain(delivery.delivery.id);
    expect((await remote('webhooks', 'delete', hook.id)).stdout).toContain(`Deleted webhook ${hook.id}`);

    // Billing: a credit grant, then postpaid with limits; the host reads the same account.
    const before = json(await remote('billing', 'show', 'acme', '--json'));
    expect(before.org_id).toBe(org.id);
    const granted = json(await remote('billing', 'grant', 'acme', '25.50', '--note', 'on-call goodwill', '--json'));
    expect(granted.credited_nanos - before.credited_nanos).toBe(25.5e9);
    expect(granted.balance_nanos - before.balance_nanos).toBe(25.5e9);
    const set = json(await remote('billing', 'set', 'acme', '--mode', 'postpaid', '--credit-limit', '500', '--low-balance', '10', '--json'));
    expect(set).toMatchObject({ org_id: org.id, mode: 'postpaid', credit_limit_nanos: 500e9, low_balance_nanos: 10e9 });
    const cleared = await remote('billing', 'set', 'acme', '--low-balance', 'none');
    expect(cleared.stdout, cleared.stderr).toMatch(/low-balance alert below\s+│\s+\(none\)/);
    for (const args of [['billing', 'show', 'acme'], ['billing', 'show', 'acme', '--json']]) {
      const [there, here] = [await remote(...args), await local(...args)];
      expect(there.code, there.stderr).toBe(0);
      expect(there.stdout, `svcctl ${args.join(' ')}`).toBe(here.stdout);
    }

    // A node that enrolled and was never heard of again can be forgotten at once.
    const services = stack.cp.app.services;
    const ghost = (await services.enrollment.enroll({ token: (await services.enrollment.createToken()).value, hostname: 'ghost-host', pool: 'na', protocolVersion: PROTOCOL_VERSION })).node;
    const forgotten = await remote('nodes', 'forget', 'ghost-host');
    expect(forgotten.code, forgotten.stderr).toBe(0);
    expect(forgotten.stdout).toBe(`${ghost.id} (ghost-host) is forgotten; 0 instance(s) settled as of never.\n`);
    expect((await stack.cp.store.nodes.getNode(ghost.id))!).toMatchObject({ cordoned: true, forgottenAt: expect.any(Number) });
    const [ghostThere, ghostHere] = [await remote('nodes', 'show', ghost.id), await local('nodes', 'show', ghost.id)];
    expect(ghostThere.code, ghostThere.stderr).toBe(0);
    expect(steady(ghostThere.stdout)).toBe(steady(ghostHere.stdout));

    const node = stack.nodeId;
    expect((await remote('nodes', 'cordon', node)).stdout).toMatch(/is now ready,cordoned/);
    expect(json(await remote('nodes', 'drain', node, '--json'))).toMatchObject({ draining: true, schedulable: false });
    expect(json(await remote('nodes', 'uncordon', node, '--json'))).toMatchObject({ cordoned: false, draining: false, schedulable: true });
    // The agent is live: the reset goes to it and comes back answered.
    const reset = await remote('nodes', 'gpu', 'reset-health', node, '0', '--wait', '20');
    expect(reset.stdout, reset.stderr).toMatch(/done: the agent cleared the health verdict/);

    const terminated = await remote('instances', 'terminate', instanceId, '--force');
    expect(terminated.stdout).toMatch(new RegExp(`^${instanceId} is (draining|terminated)`));
    await stack.waitFor(instanceId, ['terminated']);

    const audit = json(await remote('operators', 'audit', '--limit', '100', '--json')).data as Array<{ actor: string; action: string }>;
    const mine = audit.filter((e) => e.actor === operatorKeyId).map((e) => e.action);
    for (const action of [
      'createOrg', 'updateOrg', 'createKey', 'rotateKey', 'revokeKey', 'createWebhook', 'redeliverWebhook', 'rotateWebhookSecret', 'deleteWebhook', 'grantCredit', 'configureBilling', 'forgetNode',
      'createEnrollmentToken', 'revokeEnrollmentToken', 'cordonNode', 'drainNode', 'uncordonNode', 'resetGpuHealth', 'createOperatorKey', 'revokeOperatorKey', 'terminateInstance',
    ]) {
      expect(mine, action).toContain(action);
    }
    expect(audit.find((e) => e.action === 'createOperatorKey' && e.actor === 'local')).toBeTruthy();
  }, 600_000);

  it('refuses a customer key before it leaves the laptop, and the server refuses it too', async () => {
    const customer = (await stack.cp.app.services.keys.create({ orgId: (await stack.cp.app.services.orgs.ensureDefaultOrg()).org.id, admin: true })).value;
    const refused = await svcctl(['--url', stack.cp.baseUrl, '--key', customer, 'nodes', 'list'], { HOME: laptopHome });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/customer API key/);
    const res = await fetch(`${stack.cp.baseUrl}/ops/v1/nodes`, { headers: { authorization: `Bearer ${customer}` } });
    expect(res.status).toBe(403);
  });
});
