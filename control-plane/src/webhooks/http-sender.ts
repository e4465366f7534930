// Sends one webhook attempt over HTTP(S) and reports what came back. Connections go
// through a lookup that refuses addresses the target policy forbids, so a host that
// resolved to a public address at subscription time cannot be rebound to a private one.
// Redirects are not followed (a 3xx is a failed attempt): a redirect could point inside.
import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { AttemptOutcome } from './retry-schedule.js';
import { refusedAddress, urlHost, webhookResolver, type Resolver, type TargetPolicy } from './target-policy.js';

export interface AttemptRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** Aborts the attempt when the worker stops; an aborted attempt is not recorded. */
  signal: AbortSignal;
}

export type AttemptSender = (request: AttemptRequest) => Promise<AttemptOutcome>;

/** The reason an attempt was refused before any byte was sent. */
export class BlockedTargetError extends Error {
  readonly code = 'EWEBHOOKBLOCKED';
}

/**
 * A `lookup` for the request: resolves the host at connection time and refuses the
 * connection when any address it resolves to fails the policy (DNS rebinding: the name
 * pointed somewhere public when the subscription was made).
 */
export function guardedLookup(policy: TargetPolicy, resolve: Resolver = webhookResolver(policy)): LookupFunction {
  return (hostname, options, callback) => {
    const host = hostname.toLowerCase();
    resolve(host).then(
      (all) => {
        const list = options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all;
        for (const entry of list) {
          const refused = refusedAddress(host, entry.address, policy);
          if (refused) return callback(new BlockedTargetError(refused), '', 0);
        }
        const first = list[0];
        if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
        if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}

/** What of a response body is read before the attempt is settled by its status alone. */
export const MAX_RESPONSE_BODY_BYTES = 64 * 1024;

function describeError(err: NodeJS.ErrnoException): string {
  if (err instanceof BlockedTargetError) return `blocked: ${err.message}`;
  return err.code ? `${err.code}: ${err.message}` : err.message;
}

export function httpSender(policy: TargetPolicy, now: () => number = Date.now, resolve: Resolver = webhookResolver(policy)): AttemptSender {
  const lookup = guardedLookup(policy, resolve);
  return (request) =>
    new Promise<AttemptOutcome>((resolve, reject) => {
      const started = now();
      const url = new URL(request.url);
      const host = urlHost(url);
      const finish = (statusCode: number | null, error: string | null, retryAfter?: string) =>
        resolve({ statusCode, error, retryAfter, durationMs: Math.max(0, now() - started) });

      // An address literal skips the lookup, so it is judged here.
      if (ipaddr.isValid(host)) {
        const refused = refusedAddress(host, host, policy);
        if (refused) return finish(null, `blocked: ${refused}`);
      }
      const client = url.protocol === 'https:' ? https : http;
      const req = client.request(url, {
        method: 'POST',
        headers: { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)), 'user-agent': 'svc-webhooks/1' },
        lookup,
        // No pooled connections: every attempt resolves and checks the host again.
        agent: false,
        signal: request.signal,
        timeout: request.timeoutMs,
      });
      // The whole attempt, not only socket idleness, is bounded by the timeout.
      const timedOut = () => req.destroy(Object.assign(new Error(`no response within ${request.timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      const deadline = setTimeout(timedOut, request.timeoutMs);
      req.on('timeout', timedOut);
      req.on('response', (res) => {
        // The body is not kept. Read to its end it closes the attempt, but only so far: the
        // receiver is the tenant's, and an endless body at its uplink's speed would keep the
        // worker's CPU busy until the deadline, attempt after attempt (redeliver is an API).
        let received = 0;
        let enough = false;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > MAX_RESPONSE_BODY_BYTES && !enough) {
            enough = true;
            res.destroy();
          }
        });
        let failure: string | null = null;
        res.on('error', (err: NodeJS.ErrnoException) => (failure = describeError(err)));
        // 'close' comes after 'end', and also when the response is cut off (the deadline, or past the read bound).
        res.on('close', () => {
          clearTimeout(deadline);
          const retryAfter = res.headers['retry-after'];
          const error = res.complete || enough ? null : (failure ?? 'the response was cut off');
          finish(res.statusCode ?? null, error, Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
        });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(deadline);
        if (request.signal.aborted) return reject(err);
        finish(null, describeError(err));
      });
      req.end(request.body);
    });
}
