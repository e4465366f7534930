// A control plane that shuts down writes what it still holds (usage records waiting for
// their batch, token settlements) before its store closes, not into a closed store.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { defaultControlPlaneConfig } from '../src/config.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-app-close-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('closes the store last, after inference (usage) and the token limiter have flushed', async () => {
  const store = openSqliteStore(dir);
  const app = await buildApp({ config: defaultControlPlaneConfig({ dataDir: dir, httpPort: 0, logLevel: 'silent' }), store, logger: false, closeStore: true });
  const order: string[] = [];
  const spy = <T extends object>(target: T, method: keyof T & string, name: string) => {
    const original = (target[method] as (...args: unknown[]) => unknown).bind(target);
    (target as Record<string, unknown>)[method] = async (...args: unknown[]) => {
      order.push(name);
      return original(...args);
    };
  };
  spy(app.services.inference, 'close', 'inference');
  spy(app.services.tokenLimiter, 'flush', 'token settlements');
  spy(store, 'close', 'store');
  await app.close();
  expect(order.at(-1)).toBe('store');
  expect(order).toEqual(expect.arrayContaining(['inference', 'token settlements', 'store']));
  expect(order.filter((o) => o === 'store')).toHaveLength(1);
});
