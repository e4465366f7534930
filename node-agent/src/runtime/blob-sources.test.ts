import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BlobSources } from './blob-sources.js';

const digest = (c: string) => `sha256:${c.repeat(64)}`;
const dirs: string[] = [];
const fileIn = () => {
  const dir = mkdtempSync(join(tmpdir(), 'blob-sources-'));
  dirs.push(dir);
  return join(dir, 'blob-sources.json');
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('BlobSources', () => {
  it('knows a blob only for the repository that served it', () => {
    const sources = new BlobSources();
    sources.record('ghcr.io/team/app', [digest('a'), digest('b')]);
    expect(sources.has('ghcr.io/team/app', digest('a'))).toBe(true);
    expect(sources.has('ghcr.io/team/other', digest('a'))).toBe(false);
    expect(sources.has('ghcr.io/team/app', digest('c'))).toBe(false);
  });

  it('is kept across a restart, and a file it cannot read is an empty record', () => {
    const file = fileIn();
    new BlobSources(file).record('docker.io/library/busybox', [digest('a')]);
    expect(new BlobSources(file).has('docker.io/library/busybox', digest('a'))).toBe(true);
    writeFileSync(file, '{"docker.io/x": ["not-a-digest", 3], "docker.io/y": "no list"}');
    const read = new BlobSources(file);
    expect(read.has('docker.io/x', 'not-a-digest')).toBe(false);
    writeFileSync(file, 'garbage');
    expect(new BlobSources(file).has('docker.io/library/busybox', digest('a'))).toBe(false);
  });

  it('forgets the repositories recorded longest ago past its bound, never the one just recorded', () => {
    const file = fileIn();
    const sources = new BlobSources(file, 3);
    sources.record('r/one', [digest('a'), digest('b')]);
    sources.record('r/two', [digest('c')]);
    sources.record('r/one', [digest('a')]); // used again: now the newest
    sources.record('r/three', [digest('d')]);
    expect(sources.has('r/two', digest('c'))).toBe(false);
    expect(sources.has('r/one', digest('a'))).toBe(true);
    expect(sources.has('r/three', digest('d'))).toBe(true);
    sources.record('r/big', [digest('e'), digest('f'), digest('1'), digest('2')]);
    expect(sources.has('r/big', digest('e'))).toBe(true);
    expect(Object.keys(JSON.parse(readFileSync(file, 'utf8')) as object)).toEqual(['r/big']);
  });
});
