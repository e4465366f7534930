// Named contexts for remote svcctl, like kubeconfig: each names an operator API URL and
// an operator key; one may be current. The file holds keys, so it is written 0600 in a
// 0700 directory. Pure functions edit the parsed file; read/write are the I/O edges.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { isOperatorKeyValue, looksLikeOperatorKey } from '../operators/operator-key.js';

export interface SvcContext {
  url: string;
  key: string;
  /** Allows an http:// URL to a host other than loopback (the key then travels in cleartext). */
  insecure?: boolean;
}

export interface SvcConfigFile {
  current: string | null;
  contexts: Record<string, SvcContext>;
}

export const EMPTY_CONFIG: SvcConfigFile = { current: null, contexts: {} };
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** SVC_CONFIG, else $XDG_CONFIG_HOME/svcctl/config.json, else ~/.config/svcctl/config.json. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SVC_CONFIG) return env.SVC_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'svcctl', 'config.json');
}

/** True for a URL host that never leaves the machine: 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (host === 'localhost') return true;
  if (isIPv4(host)) return host.startsWith('127.');
  // WHATWG URL parsing has already compressed IPv6: [0:0::1] is [::1], [::ffff:127.0.0.1] is [::ffff:7f00:1].
  return host === '::1' || /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(host);
}

/**
 * The operator API base URL (scheme, host, optional path), without a trailing slash.
 * http:// only to loopback: an operator key must not cross a network in cleartext, unless
 * the operator says so (`insecure`: svcctl --insecure, or a context added with --insecure).
 */
export function checkUrl(url: string, options: { insecure?: boolean } = {}): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`${url} is not a URL; give the control plane's base URL, e.g. https://cp.example.com`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error(`${url}: the URL must be http:// or https://`);
  if (parsed.username || parsed.password) throw new Error(`${url}: put the key in --key or SVC_OPERATOR_KEY, not in the URL`);
  if (parsed.search || parsed.hash) throw new Error(`${url}: the URL takes no query string or fragment`);
  if (parsed.protocol === 'http:' && !options.insecure && !isLoopbackHost(parsed.hostname)) {
    throw new Error(
      `${url}: refusing to send an operator key over plain http:// to ${parsed.hostname}; use https://, ` +
        'or pass --insecure (svcctl --insecure …, or context add --insecure) to accept a cleartext key on that network',
    );
  }
  return parsed.toString().replace(/\/+$/, '');
}

/** Refuses customer keys and malformed values before they leave the laptop. */
export function checkOperatorKey(key: string): string {
  if (/^svc_(sk|pk)_/.test(key)) throw new Error('that is a customer API key (svc_…); svcctl needs an operator key (svcop_…), made with `svcctl operators keys create` on the control-plane host');
  if (!isOperatorKeyValue(key)) {
    throw new Error(looksLikeOperatorKey(key) ? 'the operator key is malformed (svcop_ and 43 letters or digits)' : 'not an operator key: operator keys start with svcop_');
  }
  return key;
}

export function parseConfig(text: string, path: string): SvcConfigFile {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  const bad = (why: string) => new Error(`${path}: ${why}`);
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw bad('expected an object with "current" and "contexts"');
  const { current = null, contexts = {} } = raw as Record<string, unknown>;
  if (current !== null && typeof current !== 'string') throw bad('"current" must be a context name or null');
  if (typeof contexts !== 'object' || contexts === null || Array.isArray(contexts)) throw bad('"contexts" must be an object of name -> {url, key}');
  const out: Record<string, SvcContext> = {};
  for (const [name, value] of Object.entries(contexts as Record<string, unknown>)) {
    const v = value as Record<string, unknown> | null;
    if (!v || typeof v.url !== 'string' || typeof v.key !== 'string') throw bad(`context "${name}" needs a string url and key`);
    if (v.insecure !== undefined && typeof v.insecure !== 'boolean') throw bad(`context "${name}": "insecure" must be true or false`);
    out[name] = { url: v.url, key: v.key, ...(v.insecure === true ? { insecure: true } : {}) };
  }
  if (current !== null && !(current in out)) throw bad(`the current context "${current}" is not defined`);
  return { current, contexts: out };
}

export function addContext(config: SvcConfigFile, name: string, context: SvcContext, use: boolean): SvcConfigFile {
  if (!NAME.test(name)) throw new Error(`context name "${name}": use letters, digits, dot, dash or underscore (up to 63)`);
  const insecure = context.insecure === true;
  const entry: SvcContext = { url: checkUrl(context.url, { insecure }), key: checkOperatorKey(context.key), ...(insecure ? { insecure } : {}) };
  return { current: use || config.current === null ? name : config.current, contexts: { ...config.contexts, [name]: entry } };
}

export function useContext(config: SvcConfigFile, name: string): SvcConfigFile {
  if (!(name in config.contexts)) throw new Error(`no context named "${name}"; contexts: ${Object.keys(config.contexts).join(', ') || '(none)'}`);
  return { ...config, current: name };
}

export function removeContext(config: SvcConfigFile, name: string): SvcConfigFile {
  if (!(name in config.contexts)) throw new Error(`no context named "${name}"`);
  const { [name]: _removed, ...rest } = config.contexts;
  return { current: config.current === name ? null : config.current, contexts: rest };
}

export function readConfig(path: string): SvcConfigFile {
  return existsSync(path) ? parseConfig(readFileSync(path, 'utf8'), path) : EMPTY_CONFIG;
}

/** Written to a temp file and renamed, so a crash never leaves half a file. */
export function writeConfig(path: string, config: SvcConfigFile): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(temp, 0o600);
  renameSync(temp, path);
}
