import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { describeConfig, loadConfig, setting } from './config.js';
import { ConfigError } from './errors.js';

const spec = {
  port: setting('T_PORT', Type.Integer({ minimum: 1, maximum: 65535 }), 8080, 'Port.'),
  debug: setting('T_DEBUG', Type.Boolean(), false, 'Debug output.'),
  name: setting('T_NAME', Type.String({ minLength: 1 }), 'svc', 'A name.'),
  token: setting('T_TOKEN', Type.String(), '', 'A secret.', { secret: true }),
};

function file(content: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'cfg-')), 'config.json');
  writeFileSync(path, content);
  return path;
}

describe('loadConfig', () => {
  it('uses defaults, then the file, then the environment', () => {
    expect(loadConfig(spec, { env: {} })).toEqual({ port: 8080, debug: false, name: 'svc', token: '' });
    const path = file('{"port": 9000, "name": "from-file"}');
    expect(loadConfig(spec, { env: { T_NAME: 'from-env', T_DEBUG: 'true' }, file: path })).toMatchObject({
      port: 9000,
      name: 'from-env',
      debug: true,
    });
  });

  it('stops with a message naming the setting', () => {
    expect(() => loadConfig(spec, { env: { T_PORT: 'eighty' } })).toThrow(ConfigError);
    expect(() => loadConfig(spec, { env: { T_PORT: 'eighty' } })).toThrow(/T_PORT \(port, from environment\)/);
    expect(() => loadConfig(spec, { env: { T_PORT: '70000' } })).toThrow(/T_PORT.*65535/);
    expect(() => loadConfig(spec, { env: { T_DEBUG: 'maybe' } })).toThrow(/T_DEBUG/);
    expect(() => loadConfig(spec, { env: {}, file: file('{"prot": 1}') })).toThrow(/unknown setting "prot"/);
    expect(() => loadConfig(spec, { env: {}, file: file('{"port": "x"}') })).toThrow(/T_PORT \(port, from config file/);
    expect(() => loadConfig(spec, { env: {}, file: file('{oops') })).toThrow(/is not valid/);
  });

  it('describes every setting with a default and hides secrets', () => {
    const rows = describeConfig(spec);
    expect(rows.map((r) => r.env)).toEqual(['T_PORT', 'T_DEBUG', 'T_NAME', 'T_TOKEN']);
    expect(rows.find((r) => r.env === 'T_TOKEN')!.default).toBe('[redacted]');
  });
});
