// Named contexts for remote svcctl, like kubeconfig: each names an operator API URL and
// an operator key; one may be current. The file holds keys, so it is written 0600 in a
// 0700 directory. Pure functions edit the parsed file; read/write are the I/O edges.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { isOperatorKeyValue, looksLikeOperatorKey } from '../operators/operator-key.js';

export interface SvcContext {
  url: string;
  key: string;
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

/** The operator API base URL (scheme, host, optional path), without a trailing slash. */
export function checkUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`${url} is not a URL; give the control plane's base URL, e.g. https://cp.example.com`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error(`${url}: the URL must be http:// or https://`);
  if (parsed.username || parsed.password) throw new Error(`${url}: put the key in --key or SVC_OPERATOR_KEY, not in the URL`);
  if (parsed.search || parsed.hash) throw new Error(`${url}: the URL takes no query string or fragment`);
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
    out[name] = { url: v.url, key: v.key };
  }
  if (current !== null && !(current in out)) throw bad(`the current context "${current}" is not defined`);
  return { current, contexts: out };
}

export function addContext(config: SvcConfigFile, name: string, context: SvcContext, use: boolean): SvcConfigFile {
  if (!NAME.test(name)) throw new Error(`context name "${name}": use letters, digits, dot, dash or underscore (up to 63)`);
  const entry = { url: checkUrl(context.url), key: checkOperatorKey(context.key) };
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
