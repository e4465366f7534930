// Stored responses on a real SQLite file: readable only by their organization and only
// until they expire; delete and purge remove them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StoredResponseRecord } from '../response-store.js';
import { openSqliteStore, type SqliteStore } from './sqlite-store.js';

let dir: string;
let store: SqliteStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'svc-respstore-'));
  store = openSqliteStore(dir);
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const record = (id: string, orgId: string, expiresAt: number): StoredResponseRecord => ({
  id,
  orgId,
  response: { id, object: 'response', output: [{ id: `msg_${id.slice(5)}_0` }] },
  history: [{ role: 'user', content: 'hi' }],
  createdAt: 0,
  expiresAt,
});

describe('SqliteResponseStore', () => {
  it('reads a response back for its organization only, whole or the Response alone', async () => {
    await store.responses.put(record('resp_a', 'org_1', 1000));
    expect(await store.responses.get('org_1', 'resp_a', 10)).toEqual(record('resp_a', 'org_1', 1000));
    expect(await store.responses.getResponse('org_1', 'resp_a', 10)).toEqual(record('resp_a', 'org_1', 1000).response);
    expect(await store.responses.get('org_2', 'resp_a', 10)).toBeUndefined();
    expect(await store.responses.getResponse('org_2', 'resp_a', 10)).toBeUndefined();
  });

  it('an expired response reads as absent and cannot be deleted; the purge removes only expired ones', async () => {
    await store.responses.put(record('resp_old', 'org_1', 1000));
    await store.responses.put(record('resp_new', 'org_1', 5000));
    expect(await store.responses.get('org_1', 'resp_old', 1000)).toBeUndefined();
    expect(await store.responses.delete('org_1', 'resp_old', 1000)).toBe(false);
    expect(await store.responses.purgeExpired(1000)).toBe(1);
    expect(await store.responses.get('org_1', 'resp_new', 1000)).toBeDefined();
  });

  it("delete removes the organization's own response once, and never another's", async () => {
    await store.responses.put(record('resp_a', 'org_1', 1000));
    expect(await store.responses.delete('org_2', 'resp_a', 10)).toBe(false);
    expect(await store.responses.delete('org_1', 'resp_a', 10)).toBe(true);
    expect(await store.responses.delete('org_1', 'resp_a', 10)).toBe(false);
  });
});
