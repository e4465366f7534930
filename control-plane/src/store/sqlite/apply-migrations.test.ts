import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { applyMigrations } from './sqlite-store.js';

const migration = (version: number) => ({ version, name: `m${version}`, sql: `CREATE TABLE t${version} (x INTEGER);` });

describe('applyMigrations', () => {
  it('applies pending versions in order, once', () => {
    const db = new Database(':memory:');
    expect(applyMigrations(db, [migration(2), migration(1)])).toBe(2);
    expect(applyMigrations(db, [migration(1), migration(2)])).toBe(2);
    const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').all();
    expect(versions).toEqual([{ version: 1 }, { version: 2 }]);
  });

  it('applies a lower version added later (migrations merged from parallel branches)', () => {
    const db = new Database(':memory:');
    applyMigrations(db, [migration(1), migration(3)]);
    expect(applyMigrations(db, [migration(1), migration(2), migration(3)])).toBe(3);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 't2'").get()).toEqual({ name: 't2' });
  });
});
