// The machine-readable contract: the /openapi.json a running control plane serves must
// lint with 0 errors under `redocly lint` (the repository's redocly.yaml), and a client
// generated from it by openapi-typescript must compile with tsc and talk to the server.
// A failure names the operations at fault (METHOD path, operationId), so a route added
// without its operationId, summary, tag or described responses is caught at merge.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import openapiTS, { astToString } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startControlPlane, type TestControlPlane } from './harness.js';

const run = promisify(execFile);
/** Steps that start redocly, tsc or tsx: seconds each, much more on a loaded 2-core host. */
const TOOL_TIMEOUT_MS = 120_000;
const root = new URL('../../', import.meta.url).pathname;
const bin = (name: string) => join(root, 'node_modules/.bin', name);

let cp: TestControlPlane;
let doc: OpenApiDocument;
const dir = mkdtempSync(join(tmpdir(), 'openapi-contract-'));

interface Operation {
  operationId?: string;
  summary?: string;
  tags?: string[];
  responses?: Record<string, { description?: string; headers?: Record<string, unknown>; content?: Record<string, unknown> }>;
}
interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  [key: string]: unknown;
}

interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn' | 'warning';
  message: string;
  location: Array<{ pointer: string }>;
}

/** "#/paths/~1v1~1models/get/tags/0" -> "GET /v1/models (listModels)". */
function operationAt(document: OpenApiDocument, pointer: string): string {
  const parts = pointer.replace(/^#\//, '').split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (parts[0] !== 'paths' || parts.length < 3) return pointer;
  const [, path, method] = parts as [string, string, string];
  const operationId = document.paths[path]?.[method]?.operationId;
  return `${method.toUpperCase()} ${path} (${operationId ?? 'no operationId'})`;
}

async function lint(document: OpenApiDocument, name: string): Promise<{ errors: string[]; warnings: string[] }> {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(document, null, 2));
  // Exit code 1 on errors: the JSON report is on stdout either way.
  const out = await run(bin('redocly'), ['lint', file, '--config', join(root, 'redocly.yaml'), '--format=json'], { cwd: root }).catch(
    (err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }),
  );
  const report = JSON.parse(out.stdout) as { problems: LintProblem[] };
  const describe = (p: LintProblem) => `${p.ruleId}: ${operationAt(document, p.location[0]?.pointer ?? '')}: ${p.message}`;
  return {
    errors: report.problems.filter((p) => p.severity === 'error').map(describe),
    warnings: report.problems.filter((p) => p.severity !== 'error').map(describe),
  };
}

beforeAll(async () => {
  cp = await startControlPlane();
  const res = await fetch(`${cp.baseUrl}/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as OpenApiDocument;
});

afterAll(async () => {
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the OpenAPI document', () => {
  it('lints with 0 errors and 0 warnings under redocly (recommended + redocly.yaml)', async () => {
    const { errors, warnings } = await lint(doc, 'openapi.json');
    expect(errors, `redocly lint errors:\n${errors.join('\n')}`).toEqual([]);
    expect(warnings, `redocly lint warnings:\n${warnings.join('\n')}`).toEqual([]);
  }, TOOL_TIMEOUT_MS);

  it('gives every operation an operationId, a summary, a tag and a described answer (each offender named)', () => {
    const offenders: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(operations)) {
        const name = `${method.toUpperCase()} ${path}`;
        if (!op.operationId) offenders.push(`${name}: no operationId`);
        if (!op.summary) offenders.push(`${name}: no summary`);
        if (!op.tags?.length) offenders.push(`${name}: no tags`);
        for (const [status, response] of Object.entries(op.responses ?? {})) {
          if (!response.description || response.description === 'Default Response') offenders.push(`${name}: response ${status} not described`);
        }
        if (!Object.keys(op.responses ?? {}).some((s) => /^4/.test(s))) offenders.push(`${name}: no 4XX (error envelope) response`);
      }
    }
    expect(offenders, offenders.join('\n')).toEqual([]);
  });

  it('includes the operational routes and a server and licence', () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) expect(doc.paths[path]?.get?.operationId, path).toBeTruthy();
    expect(doc.paths['/metrics']!.get!.responses!['200']).toMatchObject({ content: { 'text/plain': {} } });
    expect(doc.servers).toEqual([expect.objectContaining({ url: expect.any(String) })]);
    expect(doc.info).toMatchObject({ license: { name: 'Apache-2.0' } });
  });

  it('documents the billing, request-metadata and user endpoints with their methods', () => {
    const expected: Record<string, string[]> = {
      '/v1/billing/usage': ['get'],
      '/v1/billing/balance': ['get'],
      '/v1/billing/invoices': ['get'],
      '/v1/billing/invoices/{id}': ['get'],
      '/v1/billing/invoices/{id}/pdf': ['get'],
      '/v1/billing/charges': ['get'],
      '/v1/requests/{request_id}': ['get'],
      '/v1/admin/users': ['get', 'post'],
      '/v1/admin/users/{user_id}': ['delete', 'get', 'patch'],
    };
    const missing: string[] = [];
    for (const [path, methods] of Object.entries(expected)) {
      for (const method of methods) if (!doc.paths[path]?.[method]?.operationId) missing.push(`${method.toUpperCase()} ${path}`);
    }
    expect(missing, `not in the document:\n${missing.join('\n')}`).toEqual([]);
    expect(Object.keys(doc.paths['/v1/admin/users']!).sort()).toEqual(['get', 'post']);
  });

  it('documents the CSV export of the usage rollup next to its JSON', () => {
    const ok = doc.paths['/v1/billing/usage']!.get!.responses!['200']!;
    expect(Object.keys(ok.content ?? {}).sort()).toEqual(['application/json', 'text/csv']);
    expect(ok.content!['text/csv']).toMatchObject({ schema: { type: 'string' } });
    expect(ok.content!['application/json']).toMatchObject({ schema: { type: 'object', properties: { totals: { type: 'object' } } } });
  });

  it('documents the token-limit headers and the 429 on the routes that spend tokens, and lets browsers read them', async () => {
    const tokenHeaders = ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'];
    for (const path of ['/v1/chat/completions', '/v1/responses', '/v1/embeddings']) {
      const responses = doc.paths[path]!.post!.responses!;
      expect(Object.keys(responses['200']!.headers ?? {}).sort(), path).toEqual(tokenHeaders);
      expect(Object.keys(responses['429']!.headers ?? {}).sort(), path).toEqual(['retry-after', 'retry-after-ms', ...tokenHeaders]);
      expect(responses['429']!.content!['application/json'], path).toMatchObject({ schema: { $ref: '#/components/schemas/ErrorEnvelope' } });
    }
    const res = await fetch(`${cp.baseUrl}/v1/models`, { headers: { origin: 'https://app.example' } });
    const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(',').map((h) => h.trim());
    expect(exposed).toEqual(expect.arrayContaining([...tokenHeaders, 'retry-after', 'retry-after-ms']));
  });

  it('the lint catches a broken document and names the operation (this suite can fail)', async () => {
    const broken = structuredClone(doc);
    delete broken.paths['/v1/models']!.get!.operationId;
    broken.paths['/v1/embeddings']!.post!.tags = ['undeclared'];
    const { errors } = await lint(broken, 'broken.json');
    expect(errors).toContain('operation-operationId: GET /v1/models (no operationId): Operation object should contain `operationId` field.');
    expect(errors.some((e) => e.startsWith('operation-tag-defined: POST /v1/embeddings (createEmbedding)'))).toBe(true);
  }, TOOL_TIMEOUT_MS);

  it('generates TypeScript types with openapi-typescript; a client written against them compiles with tsc and calls the server, a mismatching one does not compile', async () => {
    const ast = await openapiTS(JSON.stringify(doc));
    writeFileSync(join(dir, 'api.d.ts'), astToString(ast));
    // A typed fetch wrapper: paths, methods, bodies and answers come from the generated types only.
    writeFileSync(
      join(dir, 'client.ts'),
      `import type { paths } from './api.js';

declare const process: { argv: string[] };
type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type Ok<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { responses: { 200: infer R } } ? Json<R> : never;
type Body<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;

async function call<P extends keyof paths, M extends keyof paths[P] & string>(base: string, key: string, method: M, path: P, body?: Body<P, M>): Promise<Ok<P, M>> {
  const res = await fetch(base + String(path), {
    method: method.toUpperCase(),
    headers: { authorization: 'Bearer ' + key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(method + ' ' + String(path) + ': ' + res.status + ' ' + (await res.text()));
  return (await res.json()) as Ok<P, M>;
}

const [base, key] = [process.argv[2]!, process.argv[3]!];
const models = await call(base, key, 'get', '/v1/models');
// Chat models have no embedding dimensions.
const first: string = models.data.find((m) => m.dimensions === undefined)!.id;
const ready = await call(base, key, 'get', '/readyz');
const schemaVersion: number = ready.schema_version;
const completion = await call(base, key, 'post', '/v1/chat/completions', { model: first, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
const text: string | null | undefined = completion.choices[0]?.message.content;
console.log(JSON.stringify({ models: models.data.length, first, schemaVersion, text, object: completion.object }));
`,
    );
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, lib: ['ES2022', 'DOM'], types: [], skipLibCheck: false },
        files: ['client.ts', 'wrong.ts', 'api.d.ts'],
      }),
    );
    // And a client that does not match the document, which must not compile (the types are not `any`).
    writeFileSync(
      join(dir, 'wrong.ts'),
      `import type { paths } from './api.js';
type ListModels = paths['/v1/models']['get']['responses'][200]['content']['application/json'];
const wrong: ListModels = { object: 'list', data: [{ id: 1 }] };
export {};
void wrong;
`,
    );
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    // One tsc run for both (it is the slow step): errors in wrong.ts only.
    const tsc = await run(bin('tsc'), ['-p', join(dir, 'tsconfig.json')], { cwd: dir }).then(
      () => '',
      (err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
    );
    const errors = tsc.split('\n').filter((l) => /error TS/.test(l));
    expect(errors.filter((l) => !l.startsWith('wrong.ts')), 'tsc on the generated client').toEqual([]);
    expect(errors.some((l) => /^wrong\.ts\(3,\d+\): error TS2322/.test(l)), tsc).toBe(true);

    // The same client, run: the generated types describe what the server answers.
    const key = await cp.key({ kind: 'test' });
    const { stdout } = await run(bin('tsx'), [join(dir, 'client.ts'), cp.baseUrl, key], { cwd: dir });
    const result = JSON.parse(stdout.trim()) as { models: number; first: string; schemaVersion: number; text: string; object: string };
    expect(result.models).toBeGreaterThan(0);
    expect(result.object).toBe('chat.completion');
    expect(typeof result.text).toBe('string');
    expect(result.schemaVersion).toBeGreaterThan(0);
  }, TOOL_TIMEOUT_MS);
});
