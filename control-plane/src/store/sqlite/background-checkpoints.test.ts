import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DATABASE_FILE, openSqliteStore, type SqliteStore } from './sqlite-store.js';

let dir: string;
let store: SqliteStore | undefined;
afterEach(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const record = (i: number) => ({
  id: `usage_${i}`,
  orgId: 'org_1',
  keyId: 'key_1',
  requestId: `req_${i}`,
  kind: 'chat' as const,
  model: 'm',
  quantization: 'int4',
  pool: 'na',
  promptTokens: 1,
  completionTokens: 1,
  costNanos: 1,
  user: 'x'.repeat(200),
  sandbox: false,
  createdAt: i,
});

describe('background WAL checkpoints', () => {
  it('move committed pages into the database file without the writer checkpointing', async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-ckpt-'));
    store = openSqliteStore(dir, { backgroundCheckpoints: { everyMs: 20, onError: (m) => expect.fail(m) } });
    expect(store.db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const file = join(dir, DATABASE_FILE);
    const before = statSync(file).size;
    await store.usage.append(Array.from({ length: 3000 }, (_, i) => record(i)));
    // Only the worker can have grown the database file: the writer never checkpoints.
    await expect.poll(() => statSync(file).size, { timeout: 5_000 }).toBeGreaterThan(before + 500_000);
    await store.close();
    store = undefined;
    expect(statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0).toBe(0);
  });

  it('is off by default: short-lived processes keep SQLite checkpointing in commits', async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-ckpt-'));
    store = openSqliteStore(dir);
    expect(store.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });
});
