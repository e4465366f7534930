// A tenant's JSON Schemas cost the control plane CPU to check, in proportion to their size;
// the verdicts are cached by digest, so a tenant sending fresh schemas every request is the
// one that costs. Each organization may have so many bytes of new schema checked a minute.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveReplica } from '../src/inference/replica-source.js';
import { startOpenAiUpstream, type OpenAiUpstream } from '../../test/support/openai-upstream.js';
import { startControlPlane, type TestControlPlane } from './harness.js';

const MODEL = 'llama-3.1-8b-instruct';
let cp: TestControlPlane;
let upstream: OpenAiUpstream;
let live: LiveReplica[] = [];

/** A tool whose parameters are about 10 KB, new for every `salt` (of one length). */
const tools = (salt: string) => [
  { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`${salt}_field_${i}`, { type: 'string' }])) } } },
];
const chat = (salt: string) => ({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], tools: tools(salt) });

/** The bytes of one such tool's parameters; the budget takes three and a half a minute. */
const SCHEMA_BYTES = Buffer.byteLength(JSON.stringify(tools('s0')[0]!.function.parameters));

beforeAll(async () => {
  upstream = await startOpenAiUpstream({ name: 'schemas', apiKey: 'replica-key-schemas' });
  live = [{ id: 'rep_schemas', model: MODEL, quantization: 'int4', pool: 'na', nodeId: 'node_1', baseUrl: upstream.baseUrl, engine: 'vllm', image: 'vllm/vllm-openai:test', apiKey: 'replica-key-schemas' }];
  cp = await startControlPlane({
    config: { inferenceSchemaBytesPerMinute: Math.floor(SCHEMA_BYTES * 3.5) },
    replicas: { directory: { ready: () => live }, plan: { desired: () => 1 } },
  });
});
afterAll(async () => {
  await cp?.close();
  await upstream?.close();
});

describe('new JSON Schema per organization', () => {
  it('checks up to its budget of new schema bytes a minute, then answers 429 schema_budget; schemas sent again cost nothing, and another org is not held back', async () => {
    const key = await cp.key();
    const statuses: number[] = [];
    let refused: any;
    for (let i = 0; i < 5; i++) {
      const res = await cp.request('POST', '/v1/chat/completions', { key, body: chat(`s${i}`) });
      statuses.push(res.status);
      if (res.status === 429) refused ??= res;
    }
    // Three and a half a minute: three, then refused.
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(refused.body.error).toMatchObject({ type: 'rate_limited', code: 'schema_budget' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // A schema already checked is not counted again.
    for (let i = 0; i < 3; i++) expect((await cp.request('POST', '/v1/chat/completions', { key, body: chat('s0') })).status).toBe(200);
    // Nor is another organization's budget spent.
    const another = await cp.app.services.orgs.create('another-org', 2);
    const other = await cp.key({ orgId: another.id });
    expect((await cp.request('POST', '/v1/chat/completions', { key: other, body: chat('t0') })).status).toBe(200);
  });
});
