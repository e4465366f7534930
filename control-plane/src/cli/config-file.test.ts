import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addContext, checkUrl, configPath, EMPTY_CONFIG, parseConfig, readConfig, removeContext, useContext, writeConfig } from './config-file.js';
import { resolveTarget } from './context.js';

const KEY_A = `svcop_${'a'.repeat(43)}`;
const KEY_B = `svcop_${'b'.repeat(43)}`;
const dir = mkdtempSync(join(tmpdir(), 'svcctl-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('contexts', () => {
  it('adds, makes the first one current, switches and removes', () => {
    let config = addContext(EMPTY_CONFIG, 'prod', { url: 'https://cp.example.com/', key: KEY_A }, false);
    expect(config).toEqual({ current: 'prod', contexts: { prod: { url: 'https://cp.example.com', key: KEY_A } } });
    config = addContext(config, 'staging', { url: 'http://127.0.0.1:8080', key: KEY_B }, false);
    expect(config.current).toBe('prod');
    config = useContext(config, 'staging');
    expect(config.current).toBe('staging');
    config = removeContext(config, 'staging');
    expect(config).toEqual({ current: null, contexts: { prod: { url: 'https://cp.example.com', key: KEY_A } } });
  });

  it.each([
    ['a customer key', 'https://cp.example.com', 'svc_sk_live_' + 'a'.repeat(43), /customer API key/],
    ['a malformed operator key', 'https://cp.example.com', 'svcop_abc', /malformed/],
    ['something else', 'https://cp.example.com', 'hunter2', /not an operator key/],
    ['a URL with credentials', 'https://u:p@cp.example.com', KEY_A, /not in the URL/],
    ['a non-HTTP URL', 'file:///etc/passwd', KEY_A, /http:\/\/ or https:\/\//],
    ['not a URL', 'cp.example.com', KEY_A, /is not a URL/],
  ])('refuses %s', (_label, url, key, message) => {
    expect(() => addContext(EMPTY_CONFIG, 'x', { url, key }, true)).toThrow(message);
  });

  it('refuses names and switches that make no sense', () => {
    expect(() => addContext(EMPTY_CONFIG, '../evil', { url: 'https://a.example', key: KEY_A }, true)).toThrow(/context name/);
    expect(() => useContext(EMPTY_CONFIG, 'nope')).toThrow(/no context named "nope"/);
    expect(() => removeContext(EMPTY_CONFIG, 'nope')).toThrow(/no context named "nope"/);
  });

  it('reads only a well-formed file and says what is wrong', () => {
    expect(() => parseConfig('{', 'f')).toThrow(/f is not valid JSON/);
    expect(() => parseConfig('[]', 'f')).toThrow(/expected an object/);
    expect(() => parseConfig('{"current":"x","contexts":{}}', 'f')).toThrow(/current context "x" is not defined/);
    expect(() => parseConfig('{"contexts":{"x":{"url":1}}}', 'f')).toThrow(/context "x" needs/);
  });

  it('writes the file 0600 (it holds keys) and reads it back', () => {
    const path = join(dir, 'nested', 'config.json');
    const config = addContext(EMPTY_CONFIG, 'prod', { url: 'https://cp.example.com', key: KEY_A }, true);
    writeConfig(path, config);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'nested')).mode & 0o777).toBe(0o700);
    expect(readConfig(path)).toEqual(config);
    expect(readConfig(join(dir, 'missing.json'))).toEqual(EMPTY_CONFIG);
  });

  it('lives at SVC_CONFIG, else under XDG_CONFIG_HOME, else ~/.config', () => {
    expect(configPath({ SVC_CONFIG: '/x/c.json', HOME: '/h' })).toBe('/x/c.json');
    expect(configPath({ XDG_CONFIG_HOME: '/xdg', HOME: '/h' })).toBe('/xdg/svcctl/config.json');
    expect(configPath({ HOME: '/h' })).toBe('/h/.config/svcctl/config.json');
  });
});

describe('which control plane a command talks to', () => {
  const file = join(dir, 'targets.json');
  writeFileSync(
    file,
    JSON.stringify({ current: 'prod', contexts: { prod: { url: 'https://prod.example.com', key: KEY_A }, lab: { url: 'http://127.0.0.1:9', key: KEY_B } } }),
  );
  const env = { SVC_CONFIG: file };

  it.each([
    ['--data-dir beats everything', { dataDir: '/d', url: 'https://x.example' }, { SVC_URL: 'https://y.example', SVC_OPERATOR_KEY: KEY_B }, { kind: 'local', dataDir: '/d' }],
    ['--url with --key', { url: 'https://x.example', key: KEY_B }, {}, { kind: 'remote', url: 'https://x.example', key: KEY_B }],
    ['--url with SVC_OPERATOR_KEY', { url: 'https://x.example' }, { SVC_OPERATOR_KEY: KEY_B }, { kind: 'remote', url: 'https://x.example', key: KEY_B }],
    ['--context', { context: 'lab' }, { SVC_URL: 'https://y.example', SVC_OPERATOR_KEY: KEY_A }, { kind: 'remote', url: 'http://127.0.0.1:9', key: KEY_B }],
    ['SVC_URL beats SVC_DATA_DIR and the current context', {}, { SVC_URL: 'https://y.example', SVC_OPERATOR_KEY: KEY_B, SVC_DATA_DIR: '/d' }, { kind: 'remote', url: 'https://y.example', key: KEY_B }],
    ['SVC_DATA_DIR beats the current context', {}, { SVC_DATA_DIR: '/d' }, { kind: 'local' }],
    ['the current context', {}, {}, { kind: 'remote', url: 'https://prod.example.com', key: KEY_A }],
  ])('%s', (_label, opts, extraEnv, expected) => {
    expect(resolveTarget(opts, { ...env, ...extraEnv })).toMatchObject(expected);
  });

  it('is local on a host without a config file', () => {
    expect(resolveTarget({}, { SVC_CONFIG: join(dir, 'none.json') })).toEqual({ kind: 'local' });
  });

  it('says what is missing', () => {
    expect(() => resolveTarget({ url: 'https://x.example' }, {})).toThrow(/needs an operator key/);
    expect(() => resolveTarget({ key: KEY_A }, {})).toThrow(/--key needs --url/);
    expect(() => resolveTarget({ context: 'nope' }, env)).toThrow(/no context named "nope"/);
    expect(() => resolveTarget({ url: 'https://x.example', key: 'svc_sk_live_' + 'a'.repeat(43) }, {})).toThrow(/customer API key/);
    expect(checkUrl('https://x.example/base/')).toBe('https://x.example/base');
  });
});
