// What a svcctl command talks to: an OperatorClient. Remote (the operator API over HTTP)
// or local (the data dir, opened with the same store and services as the server; kept
// for bootstrapping the first operator key). Chosen, first match wins:
//   --data-dir (local) > --url (+ --key or SVC_OPERATOR_KEY) > --context > SVC_URL
//   > SVC_DATA_DIR (local) > the config file's current context > ./data (local).
// Local mode opens PostgreSQL instead of the data dir when SVC_DATABASE_URL is set.
// http:// is refused except to loopback, unless --insecure (or the context's "insecure").
import type { Command } from 'commander';
import type { OperatorClient } from '../operators/fleet-operations.js';
import { checkOperatorKey, checkUrl, configPath, readConfig } from './config-file.js';
import { RemoteOperatorClient } from './remote-client.js';

/** Who acts when svcctl works on the data dir: the audit trail names it so. */
export const LOCAL_ACTOR = 'local';

export type Target = { kind: 'local'; dataDir?: string } | { kind: 'remote'; url: string; key: string; source: string };

interface GlobalOptions {
  dataDir?: string;
  url?: string;
  key?: string;
  context?: string;
  /** Allows http:// to a host other than loopback (the operator key in cleartext). */
  insecure?: boolean;
}

/** Where the command goes, from the global options, the environment and the config file. */
export function resolveTarget(opts: GlobalOptions, env: NodeJS.ProcessEnv = process.env): Target {
  const remote = (url: string, key: string | undefined, source: string, insecure = false): Target => {
    if (!key) throw new Error(`${source} needs an operator key: --key or SVC_OPERATOR_KEY`);
    return { kind: 'remote', url: checkUrl(url, { insecure: insecure || opts.insecure === true }), key: checkOperatorKey(key), source };
  };
  if (opts.dataDir) return { kind: 'local', dataDir: opts.dataDir };
  if (opts.url) return remote(opts.url, opts.key ?? env.SVC_OPERATOR_KEY, '--url');
  if (opts.key) throw new Error('--key needs --url (or a context: --context <name>)');
  const fromFile = (name: string): Target => {
    const path = configPath(env);
    const context = readConfig(path).contexts[name];
    if (!context) throw new Error(`no context named "${name}" in ${path}`);
    return remote(context.url, context.key, `context "${name}"`, context.insecure === true);
  };
  if (opts.context) return fromFile(opts.context);
  if (env.SVC_URL) return remote(env.SVC_URL, env.SVC_OPERATOR_KEY, 'SVC_URL');
  if (env.SVC_DATA_DIR) return { kind: 'local' };
  const current = readConfig(configPath(env)).current;
  if (current !== null) return fromFile(current);
  return { kind: 'local' };
}

/** Runs `fn` with the client `cmd`'s global options (and the environment) select. */
export async function withClient<T>(cmd: Command, fn: (client: OperatorClient) => Promise<T>): Promise<T> {
  // The root's options only: `webhooks create --url` is the webhook's URL, not the server's.
  let root = cmd;
  while (root.parent) root = root.parent;
  const target = resolveTarget(root.opts() as GlobalOptions);
  if (target.kind === 'remote') return fn(new RemoteOperatorClient(target.url, target.key));
  // Loaded only here: a laptop talking to the operator API never loads the server's code.
  const [{ createLogger, systemClock }, { loadControlPlaneConfig }, { buildServices }, { FleetOperations }, { openStore }] = await Promise.all([
    import('@svc/shared'),
    import('../config.js'),
    import('../app.js'),
    import('../operators/fleet-operations.js'),
    import('../store/open-store.js'),
  ]);
  const env = target.dataDir ? { ...process.env, SVC_DATA_DIR: target.dataDir } : process.env;
  const config = loadControlPlaneConfig(env);
  const store = await openStore(config);
  try {
    const services = buildServices({ config, store }, createLogger('warn', 'svcctl', process.stderr, config.logFormat));
    return await fn(new FleetOperations({ services, store, config, clock: systemClock }, LOCAL_ACTOR));
  } finally {
    await store.close();
  }
}
