// Per-org caps under parallel creates, on both engines: the count is taken in the
// insert's transaction, under a lock every create takes, so requests sent at once are
// counted one after another and the cap is exact (docs/webhooks.md, docs/organizations.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../src/store/store.js';
import { MAX_ACTIVE_TEST_KEYS_PER_ORG } from '../src/keys/key-service.js';
import { MAX_WEBHOOKS_PER_ORG } from '../src/webhooks/webhook-service.js';
import { STORE_ENGINES } from '../../test/support/postgres-stores.js';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const PARALLEL = 40;

describe.each(STORE_ENGINES)('%s', (engine) => {
  let cp: TestControlPlane<Store>;
  /** Lookups wait here until every create has made one: all pass the URL check together. */
  let waiting: (() => void)[] = [];
  let releaseAt = Infinity;

  beforeAll(async () => {
    cp = await startControlPlane({
      engine,
      webhookResolver: async () => {
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          if (waiting.length >= releaseAt) for (const release of waiting.splice(0)) release();
        });
        return [{ address: '93.184.216.34', family: 4 }];
      },
    });
  });
  afterAll(() => cp?.close());

  it(`${PARALLEL} webhook creates at once, their URL lookups finishing together: exactly ${MAX_WEBHOOKS_PER_ORG} are stored`, async () => {
    const org = await cp.app.services.orgs.create(`webhook-race-${engine}`);
    const admin = await cp.key({ admin: true, orgId: org.id });
    waiting = [];
    releaseAt = PARALLEL;
    const results = await Promise.all(
      Array.from({ length: PARALLEL }, () =>
        cp.request('POST', '/v1/webhooks', { key: admin, body: { url: 'https://hooks.example.com/h', event_types: ['*'] } }),
      ),
    );
    releaseAt = Infinity;
    expect(results.filter((r) => r.status === 201)).toHaveLength(MAX_WEBHOOKS_PER_ORG);
    for (const refused of results.filter((r) => r.status !== 201)) {
      expect(expectError(refused, 400, 'invalid_request')).toMatchObject({ code: 'too_many_webhooks', param: 'url' });
    }
    expect((await cp.request('GET', '/v1/webhooks', { key: admin })).body.data).toHaveLength(MAX_WEBHOOKS_PER_ORG);
  });

  it(`60 sandbox key creates at once: exactly ${MAX_ACTIVE_TEST_KEYS_PER_ORG} are active`, async () => {
    const org = await cp.app.services.orgs.create(`key-race-${engine}`);
    const admin = await cp.key({ admin: true, orgId: org.id });
    const results = await Promise.all(
      Array.from({ length: 60 }, () => cp.request('POST', '/v1/admin/keys', { key: admin, body: { kind: 'test' } })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(MAX_ACTIVE_TEST_KEYS_PER_ORG);
    for (const refused of results.filter((r) => r.status !== 201)) {
      expect(expectError(refused, 400, 'invalid_request')).toMatchObject({ code: 'too_many_keys' });
    }
    const active = (await cp.store.keys.list(org.id)).filter((k) => k.kind === 'test' && k.revokedAt === null);
    expect(active).toHaveLength(MAX_ACTIVE_TEST_KEYS_PER_ORG);
  });

  it('the same through the service, all awaiting together: the sandbox cap holds', async () => {
    const org = await cp.app.services.orgs.create(`key-race-service-${engine}`);
    const results = await Promise.allSettled(
      Array.from({ length: 60 }, () => cp.app.services.keys.create({ orgId: org.id, kind: 'test' })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_ACTIVE_TEST_KEYS_PER_ORG);
    const active = (await cp.store.keys.list(org.id)).filter((k) => k.kind === 'test' && k.revokedAt === null);
    expect(active).toHaveLength(MAX_ACTIVE_TEST_KEYS_PER_ORG);
  });
});
