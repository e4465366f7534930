import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addContext, checkUrl, configPath, EMPTY_CONFIG, isLoopbackHost, parseConfig, readConfig, removeContext, useContext, writeConfig } from './config-file.js';
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

  it('keeps "insecure" in the context, and only when asked', () => {
    const config = addContext(EMPTY_CONFIG, 'lab', { url: 'http://10.0.0.5:8080', key: KEY_A, insecure: true }, true);
    expect(config.contexts.lab).toEqual({ url: 'http://10.0.0.5:8080', key: KEY_A, insecure: true });
    expect(addContext(EMPTY_CONFIG, 'prod', { url: 'https://cp.example.com', key: KEY_A, insecure: false }, true).contexts.prod).toEqual({ url: 'https://cp.example.com', key: KEY_A });
    expect(() => addContext(EMPTY_CONFIG, 'lab', { url: 'http://10.0.0.5:8080', key: KEY_A }, true)).toThrow(/refusing to send an operator key over plain http:\/\/ to 10\.0\.0\.5/);
    expect(parseConfig(JSON.stringify(config), 'f')).toEqual(config);
    expect(() => parseConfig('{"contexts":{"x":{"url":"http://a","key":"k","insecure":"yes"}}}', 'f')).toThrow(/"insecure" must be true or false/);
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

describe('plain http:// only to loopback, unless --insecure', () => {
  it.each<[string, string]>([
    ['IPv4 loopback', 'http://127.0.0.1:8080'],
    ['anywhere in 127.0.0.0/8', 'http://127.45.6.7'],
    ['127.0.0.1 written as a number', 'http://2130706433:8080'],
    ['IPv6 loopback', 'http://[::1]:8080'],
    ['IPv6 loopback, long form', 'http://[0:0:0:0:0:0:0:1]'],
    ['IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]:8080'],
    ['localhost', 'http://localhost:8080'],
    ['LOCALHOST, with a trailing dot', 'http://LOCALHOST.:8080'],
    ['https anywhere', 'https://cp.example.com'],
    ['https to an address', 'https://10.0.0.5:8443'],
  ])('accepts %s', (_label, url) => {
    expect(() => checkUrl(url)).not.toThrow();
  });

  it.each<[string, string, string]>([
    ['a host name', 'http://cp.example.com', 'cp.example.com'],
    ['a private address', 'http://10.0.0.5:8080', '10.0.0.5'],
    ['128.0.0.1, just outside 127/8', 'http://128.0.0.1', '128.0.0.1'],
    ['a name that only starts like loopback', 'http://127.0.0.1.example.com', '127.0.0.1.example.com'],
    ['a name under localhost', 'http://evil.localhost', 'evil.localhost'],
    ['a name ending in localhost', 'http://notlocalhost', 'notlocalhost'],
    ['the unspecified IPv6 address', 'http://[::]:8080', '[::]'],
    ['an IPv6 address other than ::1', 'http://[fe80::1]:8080', '[fe80::1]'],
    ['an IPv4-mapped address off loopback', 'http://[::ffff:10.0.0.5]', '[::ffff:a00:5]'],
  ])('refuses %s, saying why and what to do', (_label, url, host) => {
    expect(() => checkUrl(url)).toThrow(`refusing to send an operator key over plain http:// to ${host}; use https://, or pass --insecure`);
    expect(checkUrl(url, { insecure: true })).toBe(url.replace(/\/$/, '').replace('[::ffff:10.0.0.5]', '[::ffff:a00:5]'));
  });

  it('--insecure does not relax anything else', () => {
    expect(() => checkUrl('file:///etc/passwd', { insecure: true })).toThrow(/http:\/\/ or https:\/\//);
    expect(() => checkUrl('http://u:p@cp.example.com', { insecure: true })).toThrow(/not in the URL/);
  });

  it('tells loopback hosts from the rest', () => {
    expect(['127.0.0.1', '127.255.255.254', '[::1]', '::1', 'localhost', '[::ffff:7f00:1]'].map(isLoopbackHost)).toEqual([true, true, true, true, true, true]);
    expect(['128.0.0.1', '0.0.0.0', '[::]', 'localhost.example', '1127.0.0.1', '[::ffff:a00:5]'].map(isLoopbackHost)).toEqual([false, false, false, false, false, false]);
  });
});

describe('which control plane a command talks to', () => {
  const file = join(dir, 'targets.json');
  writeFileSync(
    file,
    JSON.stringify({
      current: 'prod',
      contexts: {
        prod: { url: 'https://prod.example.com', key: KEY_A },
        lab: { url: 'http://127.0.0.1:9', key: KEY_B },
        office: { url: 'http://10.0.0.5:8080', key: KEY_A, insecure: true },
        cleartext: { url: 'http://10.0.0.6:8080', key: KEY_A },
      },
    }),
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

  it('refuses http:// off loopback from --url, SVC_URL or a context, unless --insecure or the context allows it', () => {
    const refused = /refusing to send an operator key over plain http:\/\/ to 10\.0\.0\.\d; use https:\/\/, or pass --insecure/;
    expect(() => resolveTarget({ url: 'http://10.0.0.5:8080', key: KEY_A }, env)).toThrow(refused);
    expect(() => resolveTarget({}, { ...env, SVC_URL: 'http://10.0.0.5:8080', SVC_OPERATOR_KEY: KEY_A })).toThrow(refused);
    expect(() => resolveTarget({ context: 'cleartext' }, env)).toThrow(refused);
    expect(resolveTarget({ url: 'http://10.0.0.5:8080', key: KEY_A, insecure: true }, env)).toMatchObject({ kind: 'remote', url: 'http://10.0.0.5:8080' });
    expect(resolveTarget({ insecure: true }, { ...env, SVC_URL: 'http://10.0.0.5:8080', SVC_OPERATOR_KEY: KEY_A })).toMatchObject({ kind: 'remote', url: 'http://10.0.0.5:8080' });
    expect(resolveTarget({ context: 'office' }, env)).toMatchObject({ kind: 'remote', url: 'http://10.0.0.5:8080' });
    expect(resolveTarget({ context: 'cleartext', insecure: true }, env)).toMatchObject({ kind: 'remote', url: 'http://10.0.0.6:8080' });
    // Loopback needs no flag: a tunnel (ssh -L) or the control-plane host itself.
    expect(resolveTarget({ url: 'http://localhost:8080', key: KEY_A }, env)).toMatchObject({ kind: 'remote', url: 'http://localhost:8080' });
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
