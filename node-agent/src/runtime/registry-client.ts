// The agent's own client of a tenant's registry (the OCI distribution API): it resolves an
// instance's image to a manifest pinned by digest and fetches that image's blobs, for the
// registry front that serves them to dockerd (registry-front.ts). Every connection it makes
// (the registry, the token service the registry names, wherever a blob is redirected) is
// checked when it is made by the pull proxy's rule (checkDestination: public addresses, or
// a registry the operator listed) and made to the address that was checked. Everything it
// reads whole (manifests, tokens, error bodies) is read with a bound.
//
// Instances pull anonymously (the API takes no registry credentials): a registry that asks
// for Basic credentials gets none, one that asks for a Bearer token gets an anonymous one.
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { Readable } from 'node:stream';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, request, type Dispatcher } from 'undici';
import type { Logger } from '@svc/shared';
import { checkDestination, connectFirst } from './pull-proxy.js';
import { DEFAULT_REGISTRY, registryOf, type RegistryPolicy } from './image-registry.js';
import { DIGEST_SHAPE, MANIFEST_ACCEPT, MAX_MANIFEST_BYTES } from './image-manifest.js';

/** Where Docker Hub's API answers (`docker.io` is only its name). */
const DOCKER_HUB_ENDPOINT = 'registry-1.docker.io';
const CONNECT_TIMEOUT_MS = 30_000;
/** A registry that sends nothing for this long, headers or body, is given up on. */
const IDLE_TIMEOUT_MS = 120_000;
const MAX_TOKEN_BYTES = 256 * 1024;
const MAX_ERROR_BYTES = 16 * 1024;
const MAX_REDIRECTS = 5;

/** What a failed connection's code means, in the words Docker's own errors use. */
const NETWORK_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by peer',
  EHOSTUNREACH: 'no route to host',
  ENETUNREACH: 'network is unreachable',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'no such host',
  ETIMEDOUT: 'i/o timeout',
  UND_ERR_CONNECT_TIMEOUT: 'i/o timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout awaiting response headers',
  UND_ERR_SOCKET: 'connection closed',
};

/** An image reference taken apart the way a registry needs it. */
export interface ImageLocation {
  /** As Docker names it: `docker.io`, `host`, `host:port`. */
  registry: string;
  /** Where the API answers: `registry-1.docker.io` for Docker Hub, else the registry. */
  endpoint: string;
  /** The repository's path in the registry (`library/busybox` on Docker Hub). */
  repository: string;
  /** A tag, or a digest. */
  reference: string;
}

/** `ref` as Docker reads it; `ref` carries a tag or digest already (image-reference.ts withDefaultTag). */
export function locate(ref: string): ImageLocation {
  const registry = registryOf(ref);
  const slash = ref.indexOf('/');
  const explicit = slash >= 0 && ref.slice(0, slash).toLowerCase() === registry;
  let path = explicit ? ref.slice(slash + 1) : ref;
  let reference = 'latest';
  const at = path.indexOf('@');
  if (at >= 0) {
    reference = path.slice(at + 1);
    path = path.slice(0, at);
  }
  const colon = path.lastIndexOf(':');
  if (colon > path.lastIndexOf('/')) {
    if (at < 0) reference = path.slice(colon + 1);
    path = path.slice(0, colon);
  }
  const hub = registry === DEFAULT_REGISTRY || registry === 'index.docker.io';
  if (hub && !path.includes('/')) path = `library/${path}`;
  return { registry: hub ? DEFAULT_REGISTRY : registry, endpoint: hub ? DOCKER_HUB_ENDPOINT : registry, repository: path, reference };
}

/** What `docker info` says of dockerd's registries (its RegistryConfig). */
export interface DockerdRegistryConfig {
  IndexConfigs?: Record<string, { Secure?: boolean }> | null;
  InsecureRegistryCIDRs?: string[] | null;
}

/**
 * Whether dockerd treats `registry` as insecure (plain HTTP, certificates unchecked), by
 * Docker's rule: listed so by name, or one of the addresses its host stands for inside one
 * of the insecure CIDRs (127.0.0.0/8 by default).
 */
export function isInsecureRegistry(registry: string, config: DockerdRegistryConfig, addresses: readonly string[]): boolean {
  const named = config.IndexConfigs?.[registry];
  if (named) return named.Secure === false;
  const ranges = (config.InsecureRegistryCIDRs ?? []).flatMap((cidr) => {
    try {
      return [ipaddr.parseCIDR(cidr)];
    } catch {
      return [];
    }
  });
  return addresses.some((address) => {
    if (!ipaddr.isValid(address)) return false;
    const parsed = ipaddr.process(address);
    return ranges.some(([range, bits]) => parsed.kind() === range.kind() && parsed.match(range, bits));
  });
}

/** A challenge of `WWW-Authenticate` (RFC 7235): its scheme and parameters. */
export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** More of a `WWW-Authenticate` value than any registry sends is not read (its parse stays cheap). */
const MAX_CHALLENGE_CHARS = 4096;
const TOKEN_CHAR = /[A-Za-z0-9!#$%&'*+.^_`|~-]/;

/**
 * The challenge of a `WWW-Authenticate` value (or of several) an anonymous pull answers:
 * Bearer where offered, else the first; null when there is none. One pass over at most
 * MAX_CHALLENGE_CHARS characters.
 */
export function parseChallenge(header: string | readonly string[] | undefined): Challenge | null {
  const values = typeof header === 'string' ? [header] : (header ?? []);
  const challenges = values.flatMap((value) => challengesIn(value.slice(0, MAX_CHALLENGE_CHARS)));
  return challenges.find((challenge) => challenge.scheme === 'bearer') ?? challenges[0] ?? null;
}

/** RFC 7235's `challenge *( "," challenge )`, each `scheme [ param *( "," param ) ]`. */
function challengesIn(text: string): Challenge[] {
  const challenges: Challenge[] = [];
  let i = 0;
  const skip = (chars: string) => {
    while (i < text.length && chars.includes(text[i]!)) i++;
  };
  const token = (): string => {
    const from = i;
    while (i < text.length && TOKEN_CHAR.test(text[i]!)) i++;
    return text.slice(from, i);
  };
  while (i < text.length) {
    skip(' \t,');
    const scheme = token();
    if (!scheme) break;
    const challenge: Challenge = { scheme: scheme.toLowerCase(), params: {} };
    challenges.push(challenge);
    for (;;) {
      skip(' \t');
      const at = i;
      const name = token();
      skip(' \t');
      if (!name || text[i] !== '=') {
        i = at; // the next challenge's scheme, or nothing more
        break;
      }
      i++;
      skip(' \t');
      let value = '';
      if (text[i] === '"') {
        for (i++; i < text.length && text[i] !== '"'; i++) value += text[i] === '\\' && i + 1 < text.length ? text[++i] : text[i];
        i++;
      } else {
        const from = i;
        while (i < text.length && text[i] !== ',' && text[i] !== ' ' && text[i] !== '\t') i++;
        value = text.slice(from, i);
      }
      challenge.params[name.toLowerCase()] = value;
      skip(' \t');
      if (text[i] !== ',') break;
      i++;
    }
  }
  return challenges;
}

/** A failed exchange with a registry, worded for the tenant; `permanent` when trying again cannot help. */
export class RegistryFailure extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
  }
}

export interface RegistryClientOptions {
  log?: Pick<Logger, 'info'>;
  /** Whose connections are checked; absent: none are (a node without a policy, tests). */
  policy?: RegistryPolicy;
  /** Whether dockerd treats `registry` as insecure (plain HTTP allowed), as `docker info` says. */
  insecure?: (registry: string) => Promise<boolean>;
}

/** A registry session for one repository: its scheme and token, found once. */
export interface RepositorySession {
  location: ImageLocation;
  base: string;
  authorization?: string;
}

export interface FetchedManifest {
  body: Buffer;
  mediaType: string | undefined;
  digest: string;
}

/**
 * Stops reading `body` (a redirect's, a ping's, one past its bound) and closes its
 * connection; undici reports the abort as an error, which is expected here.
 */
export function discard(body: Readable): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** Printable ASCII, bounded: what a registry says is quoted to the tenant. */
const printable = (text: string, max = 200): string => {
  const clean = text.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
};

async function readBounded(body: Readable, max: number, what: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += (chunk as Buffer).length;
    if (total > max) {
      discard(body);
      throw new RegistryFailure(`${what} is larger than ${max} bytes, more than this node reads`, true);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** What a registry's error answer says (`{"errors":[{"code","message"}]}`), for the tenant. */
async function failureOf(status: number, body: Readable, what: string): Promise<RegistryFailure> {
  let said = '';
  try {
    const parsed = JSON.parse((await readBounded(body, MAX_ERROR_BYTES, 'an error answer')).toString('utf8')) as { errors?: Array<{ code?: unknown; message?: unknown }> };
    const first = parsed.errors?.[0];
    if (first) said = [first.code, first.message].filter((part) => typeof part === 'string').join(': ');
  } catch {
    discard(body);
  }
  const word = status === 401 ? 'unauthorized' : status === 403 ? 'denied' : status === 404 ? 'not found' : `HTTP ${status}`;
  const permanent = status === 401 || status === 403 || status === 404 || status === 400;
  return new RegistryFailure(`${what}: ${word}${said ? ` (${printable(said)})` : ''}`, permanent);
}

export class RegistryClient {
  private readonly dispatcher: Dispatcher;
  private readonly insecureDispatcher: Dispatcher;

  constructor(private readonly options: RegistryClientOptions = {}) {
    this.dispatcher = this.agent(true);
    // Docker skips certificate checks for a registry it treats as insecure, and so does this.
    this.insecureDispatcher = this.agent(false);
  }

  private agent(verify: boolean): Dispatcher {
    const connector = buildConnector({ timeout: CONNECT_TIMEOUT_MS, rejectUnauthorized: verify });
    const policy = this.options.policy;
    return new Agent({
      headersTimeout: IDLE_TIMEOUT_MS,
      bodyTimeout: IDLE_TIMEOUT_MS,
      connect: (opts, callback) => {
        if (!policy) return connector(opts, callback);
        const port = Number(opts.port || (opts.protocol === 'https:' ? 443 : 80));
        const host = opts.hostname.replace(/^\[|\]$/g, '');
        checkDestination(host, port, policy).then(
          (destination) => {
            if ('refused' in destination) {
              // One wording whatever the reason: which names the node's resolver knows is not the tenant's to probe.
              this.options.log?.info({ host, reason: destination.refused }, 'registry client: refused a connection');
              callback(new RegistryFailure(`refused by the node: ${printable(host)} is not a public address this node reaches for instances`, true), null);
            }
            // The name stays the TLS server name and Host; only the addresses are the ones checked.
            else {
              const servername = isIP(host) ? {} : { servername: host };
              type Connection = Parameters<buildConnector.Callback>[1];
              const attempt = (address: string, timeout: number, done: (err: Error | null, connection: Connection) => void): void =>
                buildConnector({ timeout, rejectUnauthorized: verify })({ ...opts, hostname: address, ...servername }, (...args) => done(args[0], args[1]));
              connectFirst<Connection>(destination.addresses, CONNECT_TIMEOUT_MS, attempt, (err, connection) => (err ? callback(err, null) : callback(null, connection!)));
            }
          },
          (err: Error) => callback(err, null),
        );
      },
    });
  }

  /** Finds how to talk to `location`'s registry: https, or http where dockerd would, and an anonymous token where it asks for one. */
  async open(location: ImageLocation, signal?: AbortSignal): Promise<RepositorySession> {
    const insecure = (await this.options.insecure?.(location.registry)) ?? false;
    let base = `https://${location.endpoint}`;
    let ping: Dispatcher.ResponseData;
    try {
      ping = await this.follow(`${base}/v2/`, {}, {}, insecure, signal);
    } catch (err) {
      // As Docker: a registry it calls insecure is tried over plain HTTP once HTTPS fails.
      if (!insecure || (err as RegistryFailure).permanent) throw err;
      base = `http://${location.endpoint}`;
      ping = await this.follow(`${base}/v2/`, {}, {}, insecure, signal);
    }
    const session: RepositorySession = { location, base };
    // Only the status and the challenge are read: a body, however long, is not.
    discard(ping.body);
    if (ping.statusCode === 401) {
      const challenge = parseChallenge(ping.headers['www-authenticate']);
      if (challenge?.scheme === 'bearer' && challenge.params.realm) session.authorization = `Bearer ${await this.token(challenge.params, location, insecure, signal)}`;
    }
    return session;
  }

  /** The manifest `reference` (a tag or digest) names, read with a bound, with the digest of its bytes. */
  async manifest(session: RepositorySession, reference: string, signal?: AbortSignal): Promise<FetchedManifest> {
    const { location } = session;
    const what = `manifest ${location.repository}:${reference} at ${location.registry}`;
    const answer = await this.follow(`${session.base}/v2/${location.repository}/manifests/${reference}`, { accept: MANIFEST_ACCEPT }, this.auth(session), await this.insecure(location), signal);
    if (answer.statusCode !== 200) throw await failureOf(answer.statusCode, answer.body, what);
    const declared = Number(answer.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_MANIFEST_BYTES) {
      discard(answer.body);
      throw new RegistryFailure(`${what} is ${declared} bytes, more than the ${MAX_MANIFEST_BYTES} this node reads`, true);
    }
    const body = await readBounded(answer.body, MAX_MANIFEST_BYTES, what);
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    if (DIGEST_SHAPE.test(reference) && digest !== reference) throw new RegistryFailure(`${what}: the registry answered other content (${digest})`, true);
    const type = answer.headers['content-type'];
    return { body, digest, mediaType: typeof type === 'string' ? type : undefined };
  }

  /** A blob of the session's repository, whole: the body the registry (or where it redirects) sends. */
  async blob(session: RepositorySession, digest: string, options: { signal?: AbortSignal } = {}): Promise<Readable> {
    const { signal } = options;
    const { location } = session;
    const insecure = await this.insecure(location);
    const url = `${session.base}/v2/${location.repository}/blobs/${digest}`;
    const headers: Record<string, string> = {};
    let answer = await this.follow(url, headers, this.auth(session), insecure, signal);
    // A token outlives no long pull (Docker Hub's last five minutes): one more, once.
    if (answer.statusCode === 401 && session.authorization) {
      discard(answer.body);
      session.authorization = (await this.open(location, signal)).authorization;
      answer = await this.follow(url, headers, this.auth(session), insecure, signal);
    }
    if (answer.statusCode !== 200) throw await failureOf(answer.statusCode, answer.body, `blob ${digest} of ${location.repository}`);
    return answer.body;
  }

  /**
   * GET `url`, following up to MAX_REDIRECTS redirects (registries redirect their API, and
   * their blobs to object storage), each hop's connection checked like the first. `auth` goes
   * to the first URL's origin only, never where it redirects; a redirect's body is not read.
   */
  private async follow(url: string, headers: Record<string, string>, auth: Record<string, string>, insecure: boolean, signal?: AbortSignal): Promise<Dispatcher.ResponseData> {
    const origin = new URL(url).origin;
    let next = url;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const answer = await this.get(next, new URL(next).origin === origin ? { ...headers, ...auth } : headers, insecure, signal);
      const redirect = answer.headers.location;
      if (answer.statusCode < 300 || answer.statusCode >= 400 || typeof redirect !== 'string') return answer;
      discard(answer.body);
      try {
        next = new URL(redirect, next).toString();
      } catch {
        throw new RegistryFailure(`${new URL(next).host} redirected to something that is not a URL`, true);
      }
      if (!/^https?:$/.test(new URL(next).protocol)) throw new RegistryFailure(`${new URL(url).host} redirected to a URL that is not http(s)`, true);
    }
    throw new RegistryFailure(`${new URL(url).host} redirected more than ${MAX_REDIRECTS} times`, true);
  }

  async close(): Promise<void> {
    await Promise.all([this.dispatcher.close(), this.insecureDispatcher.close()]);
  }

  private auth(session: RepositorySession): Record<string, string> {
    return session.authorization ? { authorization: session.authorization } : {};
  }

  private async insecure(location: ImageLocation): Promise<boolean> {
    return (await this.options.insecure?.(location.registry)) ?? false;
  }

  /** An anonymous pull token from the service the registry named (Docker's token protocol). */
  private async token(params: Record<string, string>, location: ImageLocation, insecure: boolean, signal?: AbortSignal): Promise<string> {
    let url: URL;
    try {
      url = new URL(params.realm!);
    } catch {
      throw new RegistryFailure(`registry ${location.registry} named a token service that is not a URL`, true);
    }
    if (!/^https?:$/.test(url.protocol)) throw new RegistryFailure(`registry ${location.registry} named a token service that is not http(s)`, true);
    if (params.service) url.searchParams.set('service', params.service);
    url.searchParams.set('scope', `repository:${location.repository}:pull`);
    const answer = await this.follow(url.toString(), {}, {}, insecure, signal);
    if (answer.statusCode !== 200) throw await failureOf(answer.statusCode, answer.body, `token for ${location.repository} at ${location.registry}`);
    const body = await readBounded(answer.body, MAX_TOKEN_BYTES, 'a token answer');
    let parsed: { token?: unknown; access_token?: unknown };
    try {
      parsed = JSON.parse(body.toString('utf8')) as typeof parsed;
    } catch {
      throw new RegistryFailure(`the token service of ${location.registry} answered no JSON`, true);
    }
    const token = typeof parsed.token === 'string' ? parsed.token : parsed.access_token;
    if (typeof token !== 'string' || !/^[\x21-\x7e]+$/.test(token)) throw new RegistryFailure(`the token service of ${location.registry} answered no token`, true);
    return token;
  }

  /** A GET whose failure to connect is a RegistryFailure worded for the tenant (a refusal by the node is permanent). */
  private async get(url: string, headers: Record<string, string>, insecure: boolean, signal?: AbortSignal): Promise<Dispatcher.ResponseData> {
    try {
      return await request(url, { method: 'GET', headers: { 'user-agent': 'svc-node-agent', ...headers }, dispatcher: insecure ? this.insecureDispatcher : this.dispatcher, ...(signal ? { signal } : {}) });
    } catch (err) {
      if (err instanceof RegistryFailure) throw err;
      if (signal?.aborted) throw new RegistryFailure(`${new URL(url).host}: ${printable(String((signal.reason as Error | undefined)?.message ?? 'given up'))}`, true);
      const code = (err as { code?: string } | null)?.code;
      const message = (code && NETWORK_ERRORS[code]) ?? (err instanceof Error ? err.message : String(err));
      throw new RegistryFailure(`${new URL(url).host} did not answer: ${printable(message)}`, false);
    }
  }
}
