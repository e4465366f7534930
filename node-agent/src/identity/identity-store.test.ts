import { mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { IdentityFileError, identityPath, readIdentity, writeIdentity } from './identity-store.js';

const dir = () => join(mkdtempSync(join(tmpdir(), 'agent-identity-')), 'agent');

describe('identity store', () => {
  it('has no identity before enrollment', async () => {
    expect(await readIdentity(dir())).toBeUndefined();
  });

  it('persists the identity with mode 0600 and reads it back', async () => {
    const dataDir = dir();
    const identity = { node_id: 'node_1', node_secret: 's3cret', control_plane: '127.0.0.1:7070', enrolled_at: '2026-11-22T00:00:00.000Z' };
    await writeIdentity(dataDir, identity);
    expect(statSync(identityPath(dataDir)).mode & 0o777).toBe(0o600);
    expect(await readIdentity(dataDir)).toEqual(identity);
  });

  it('refuses a corrupt or incomplete file with a message saying what to do', async () => {
    const dataDir = dir();
    await writeIdentity(dataDir, { node_id: 'n', node_secret: 's', control_plane: '', enrolled_at: '' });
    writeFileSync(identityPath(dataDir), '{oops');
    await expect(readIdentity(dataDir)).rejects.toThrow(IdentityFileError);
    writeFileSync(identityPath(dataDir), '{"node_id":"n"}');
    await expect(readIdentity(dataDir)).rejects.toThrow(/lacks node_id or node_secret; remove it and enroll again/);
  });
});
