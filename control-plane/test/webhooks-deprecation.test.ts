// model.deprecation_announced: a deprecation in the catalog is announced once, to every
// org's subscriptions, and a restart on the same data dir does not announce it again.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { buildApp } from '../src/app.js';
import { defaultControlPlaneConfig } from '../src/config.js';
import { DEFAULT_CATALOG_PATH } from '../src/models/catalog.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { MODEL_DEPRECATION_ANNOUNCED } from '../src/webhooks/event-types.js';
import { WebhookReceiver, until } from './webhooks-support.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-webhooks-deprecation-'));
const receivers: WebhookReceiver[] = [];
afterAll(async () => {
  for (const r of receivers) await r.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The shipped catalog (mistral deprecated), plus a deprecation of qwen when asked. */
function writeCatalog(name: string, deprecateQwen: boolean): string {
  const catalog = JSON.parse(readFileSync(DEFAULT_CATALOG_PATH, 'utf8'));
  if (deprecateQwen) {
    const qwen = catalog.models.find((m: { id: string }) => m.id === 'qwen2.5-7b-instruct');
    qwen.deprecation = { announced_at: '2026-01-01T00:00:00Z', shutdown_at: '2027-06-01T00:00:00Z', replacement: 'llama-3.1-8b-instruct' };
  }
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(catalog));
  return path;
}

async function boot(catalogPath: string) {
  const dataDir = join(dir, 'data');
  const store = openSqliteStore(dataDir);
  const config = defaultControlPlaneConfig({ dataDir, httpPort: 0, logLevel: 'silent', modelCatalog: catalogPath, webhookPollMs: 20, webhookAllowedTargets: ['127.0.0.1'] });
  const app = await buildApp({ config, store, clock: new ManualClock(Date.now()), logger: false });
  const { org } = await app.services.orgs.ensureDefaultOrg();
  await app.listen({ host: '127.0.0.1', port: 0 });
  const announcements = async () => store.events.list({ type: MODEL_DEPRECATION_ANNOUNCED });
  return { app, store, org, announcements, close: async () => (await app.close(), await store.close()) };
}

describe('model deprecation announcements', () => {
  it('are announced once across restarts and reach every org', async () => {
    const first = await boot(writeCatalog('catalog-1.json', false));
    await until('mistral announced', async () => (await first.announcements()).length === 1);
    const [mistral] = await first.announcements();
    expect(mistral).toMatchObject({
      orgId: null,
      subject: 'mistral-7b-instruct-v0.3',
      data: {
        model_id: 'mistral-7b-instruct-v0.3',
        announced_at: '2026-11-01T00:00:00Z',
        shutdown_at: '2027-01-30T00:00:00Z',
        replacement: 'llama-3.1-8b-instruct',
      },
    });
    // Two orgs subscribe (after that announcement, so they do not receive it).
    const otherOrg = await first.app.services.orgs.create('second-org');
    const secrets = new Map<string, string>();
    for (const orgId of [first.org.id, otherOrg.id]) {
      const receiver = await WebhookReceiver.start();
      receivers.push(receiver);
      const created = await first.app.services.webhooks.create({ orgId, url: receiver.url, eventTypes: [MODEL_DEPRECATION_ANNOUNCED] });
      receiver.secrets = [created.secret];
      secrets.set(orgId, created.secret);
    }
    await first.close();

    // A restart with a catalog that adds a deprecation announces only the new one.
    const second = await boot(writeCatalog('catalog-2.json', true));
    await until('qwen delivered to both orgs', () => receivers.every((r) => r.delivered().length === 1));
    expect((await second.announcements()).map((e) => e.subject)).toEqual(['mistral-7b-instruct-v0.3', 'qwen2.5-7b-instruct']);
    for (const receiver of receivers) {
      const [request] = receiver.requests;
      expect(request!.event).toMatchObject({
        type: MODEL_DEPRECATION_ANNOUNCED,
        data: { model_id: 'qwen2.5-7b-instruct', shutdown_at: '2027-06-01T00:00:00Z', replacement: 'llama-3.1-8b-instruct' },
      });
      expect(request!.verifiedWith).toHaveLength(1);
    }
    expect(receivers[0]!.requests[0]!.webhookId).toBe(receivers[1]!.requests[0]!.webhookId);
    await second.close();

    // Another restart with the same catalog announces nothing. A revoke delivered after
    // start-up proves the start-up pass (which announces first) has run.
    const third = await boot(writeCatalog('catalog-3.json', true));
    const sentinel = await WebhookReceiver.start();
    receivers.push(sentinel);
    sentinel.secrets = [(await third.app.services.webhooks.create({ orgId: third.org.id, url: sentinel.url, eventTypes: ['key.revoked'] })).secret];
    const key = await third.app.services.keys.create({ orgId: third.org.id });
    await third.app.services.keys.revoke(key.record.id);
    await until('sentinel delivered', () => sentinel.delivered().length === 1);
    expect(await third.announcements()).toHaveLength(2);
    expect(receivers[0]!.requests).toHaveLength(1);
    expect(receivers[1]!.requests).toHaveLength(1);
    await third.close();
  });
});
