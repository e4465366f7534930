// Model-server replicas against a tenant with a paid account who wants inference without
// paying for it: the real control plane, a real agent process, the real Docker engine and
// the project's CPU engine image. A replica's published port is found (a port scan would
// find it too) and called directly; the replica's key is looked for in every API answer;
// a stream is cut right after its first content chunk to dodge the bill.
import { request as httpRequest } from 'node:http';
import Docker from 'dockerode';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlaneConfig } from '../control-plane/src/config.js';
import { replicaApiKey } from '../control-plane/src/replicas/engine-adapter.js';
import type { ReplicaRecord } from '../control-plane/src/replicas/replica-record.js';
import { eventually, svcctlJson } from './support/node-agent-process.js';
import { startReplicaStack, type ReplicaStack } from './support/replica-stack.js';

const docker = new Docker();
let stack: ReplicaStack;
let config: ControlPlaneConfig;
let cp: ReplicaStack['cp'];
/** The tenant's own keys: an ordinary live key, and an admin key of its organization. */
let liveKey: string;
let adminKey: string;
let chatReplica: ReplicaRecord;
let embedReplica: ReplicaRecord;

const auth = (key: string) => ({ authorization: `Bearer ${key}` });
const direct = (replica: ReplicaRecord, path: string, init: RequestInit = {}) =>
  fetch(`http://${replica.endpoint}${path}`, { ...init, signal: AbortSignal.timeout(10_000) });
const json = (body: unknown): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

beforeAll(async () => {
  // Generous waits: the host may be shared with other test runs (load far above its cores).
  stack = await startReplicaStack({
    name: 'hostile-replicas-e2e',
    replicas: 'tiny-chat:int4:na=1,tiny-embed:int4:na=1',
    ready: 2,
    enrollTimeoutMs: 100_000,
    readyTimeoutMs: 180_000,
  });
  ({ cp, config } = stack);
  liveKey = (await cp.app.services.keys.create({ orgId: stack.orgId })).value;
  adminKey = (await cp.app.services.keys.create({ orgId: stack.orgId, admin: true })).value;
  const records = await cp.app.services.replicas.list({ includeEnded: false, limit: 10 });
  chatReplica = records.find((r) => r.model === 'tiny-chat')!;
  embedReplica = records.find((r) => r.model === 'tiny-embed')!;
}, 300_000);

afterAll(() => stack?.close());

/** The usage record of one request, once written (a cut stream records it when the relay ends). */
async function usageOf(requestId: string): Promise<Record<string, number>> {
  return eventually(async () => {
    const res = await fetch(`${cp.baseUrl}/v1/usage?limit=50`, { headers: auth(liveKey) });
    const page = ((await res.json()) as { data: Array<Record<string, number> & { request_id: string }> }).data;
    return page.find((r) => r.request_id === requestId);
  }, 10_000, `the usage record of ${requestId}`);
}

describe('as a hostile tenant', () => {
  it("cannot use a replica's published port without its key, while the same model through the control plane works", async () => {
    const secret = replicaApiKey(chatReplica)!;
    expect(secret).toMatch(/^[\w-]{43}$/);
    const chat = { model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }] };
    const calls: Array<[ReplicaRecord, string, RequestInit]> = [
      [chatReplica, '/v1/chat/completions', json(chat)],
      [chatReplica, '/v1/chat/completions', json({ ...chat, stream: true })],
      [chatReplica, '/v1/models', {}],
      [chatReplica, '/metrics', {}],
      [embedReplica, '/v1/embeddings', json({ model: 'tiny-embed', input: 'hello' })],
    ];
    // No key, a guessed key, the tenant's own API key, and the other replica's key.
    const attempts = [undefined, 'Bearer sk-anything', `Bearer ${liveKey}`, `Bearer ${adminKey}`, `Bearer ${replicaApiKey(embedReplica)}`];
    for (const [replica, path, init] of calls) {
      for (const authorization of attempts) {
        if (replica === embedReplica && authorization?.endsWith(replicaApiKey(embedReplica)!)) continue;
        const res = await direct(replica, path, { ...init, headers: { ...(init.headers as Record<string, string>), ...(authorization ? { authorization } : {}) } });
        const text = await res.text();
        expect(res.status, `${path} with ${authorization ?? 'no key'}: ${text}`).toBe(401);
        expect(JSON.parse(text)).toMatchObject({ error: { type: 'unauthorized' } });
        expect(text).not.toContain('abcdefghijklmnopqrstuvwxyz'.slice(3));
      }
    }
    // What the agent probes answers without a key, and says nothing but that it is up.
    const health = await direct(chatReplica, '/health');
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    // The control plane holds the key: the tenant's request through it is served (and billed).
    const client = new OpenAI({ apiKey: liveKey, baseURL: `${cp.baseUrl}/v1`, maxRetries: 0, timeout: 20_000 });
    const completion = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'abc' }] });
    expect(completion.choices[0]!.message.content).toBe('defghijklmnopqrstuvwxyz');
    const embedding = await client.embeddings.create({ model: 'tiny-embed', input: 'hello', encoding_format: 'float' });
    expect(embedding.data[0]!.embedding).toHaveLength(128);
    // And the engine itself is what refuses: with the key, the port serves (the key is the only gate).
    const withKey = await direct(chatReplica, '/v1/models', { headers: auth(secret) });
    expect(withKey.status).toBe(200);
  });

  it("finds the replicas' keys in no API answer, in no operator view and not on the container's command line", async () => {
    const secrets = [replicaApiKey(chatReplica)!, replicaApiKey(embedReplica)!];
    // Every GET of the API without path parameters, with the organization's admin key,
    // plus the models and a completion (whole and streamed) that a replica served.
    const spec = (await (await fetch(`${cp.baseUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const paths = Object.keys(spec.paths).filter((p) => 'get' in spec.paths[p]! && !p.includes('{'));
    expect(paths).toEqual(expect.arrayContaining(['/v1/models', '/v1/usage']));
    const answers: string[] = [];
    for (const path of [...paths, '/v1/models/tiny-chat', '/v1/models/tiny-embed']) {
      const res = await fetch(cp.baseUrl + path, { headers: auth(adminKey) });
      answers.push(`${path} ${res.status} ${JSON.stringify([...res.headers])} ${await res.text()}`);
    }
    for (const stream of [false, true]) {
      const res = await fetch(`${cp.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...auth(liveKey), 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'xyz' }], stream }),
      });
      expect(res.status).toBe(200);
      answers.push(`${JSON.stringify([...res.headers])} ${await res.text()}`);
    }
    answers.push(JSON.stringify(await svcctlJson(config.dataDir, 'replicas', 'list', '--all')));
    for (const answer of answers) for (const secret of secrets) expect(answer).not.toContain(secret);
    // On the host the key is in the container's environment (the provider's view), never
    // in its command line (which `ps` shows to every user of the host).
    const container = await docker.getContainer((await docker.listContainers({ filters: { label: [`svc.replica=${chatReplica.id}`] } }))[0]!.Id).inspect();
    expect(JSON.stringify([container.Path, container.Args, container.Config.Cmd])).not.toContain(secrets[0]);
    expect(container.Config.Env).toContain(`SVC_ENGINE_API_KEY=${secrets[0]}`);
  });

  it('is billed the prompt tokens the replica processed when it cuts a stream after the first content chunk', async () => {
    const body = JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'Continue, please: abc' }], stream: true });
    const full = await fetch(`${cp.baseUrl}/v1/chat/completions`, { method: 'POST', headers: { ...auth(liveKey), 'content-type': 'application/json' }, body });
    expect(await full.text()).toContain('[DONE]');
    const fullUsage = await usageOf(full.headers.get('x-request-id')!);
    expect(fullUsage).toMatchObject({ prompt_tokens: 22, completion_tokens: 23 });

    // A raw HTTP client that destroys its socket the moment the first content arrives.
    const cutRequestId = await new Promise<string>((resolve, reject) => {
      const url = new URL(`${cp.baseUrl}/v1/chat/completions`);
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { ...auth(liveKey), 'content-type': 'application/json' } }, (res) => {
        let seen = '';
        res.on('data', (d: Buffer) => {
          seen += d.toString('utf8');
          if (seen.includes('"content":"d"')) {
            req.destroy();
            resolve(res.headers['x-request-id'] as string);
          }
        });
        res.on('end', () => reject(new Error(`the stream ended before its first content chunk: ${seen}`)));
      });
      req.on('error', (err) => { if (!req.destroyed) reject(err); });
      req.end(body);
    });
    const cut = await usageOf(cutRequestId);
    expect(cut.prompt_tokens).toBeGreaterThan(0);
    expect(cut.prompt_tokens).toBe(fullUsage.prompt_tokens);
    expect(cut.completion_tokens).toBeGreaterThanOrEqual(1);
    expect(cut.cost_usd).toBeGreaterThan(0);
  });
});
