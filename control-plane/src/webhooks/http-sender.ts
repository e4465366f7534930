// Sends one webhook attempt over HTTP(S) and reports what came back. Connections go
// through a lookup that refuses addresses the target policy forbids, so a host that
// resolved to a public address at subscription time cannot be rebound to a private one.
// Redirects are not followed (a 3xx is a failed attempt): a redirect could point inside.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { AttemptOutcome } from './retry-schedule.js';
import { refusedAddress, urlHost, type TargetPolicy } from './target-policy.js';

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

/** Wraps dns.lookup: every address the host resolves to must pass the policy. */
export function guardedLookup(policy: TargetPolicy, resolve: typeof dnsLookup = dnsLookup): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as unknown as LookupAddress[];
      const host = hostname.toLowerCase();
      for (const entry of list) {
        const refused = refusedAddress(host, entry.address, policy);
        if (refused) return callback(new BlockedTargetError(refused), '', 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      callback(null, first.address, first.family);
    });
  };
}

function describeError(err: NodeJS.ErrnoException): string {
  if (err instanceof BlockedTargetError) return `blocked: ${err.message}`;
  return err.code ? `${err.code}: ${err.message}` : err.message;
}

export function httpSender(policy: TargetPolicy, now: () => number = Date.now): AttemptSender {
  const lookup = guardedLookup(policy);
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
        signal: request.signal,
        timeout: request.timeoutMs,
      });
      // The whole attempt, not only socket idleness, is bounded by the timeout.
      const timedOut = () => req.destroy(Object.assign(new Error(`no response within ${request.timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      const deadline = setTimeout(timedOut, request.timeoutMs);
      req.on('timeout', timedOut);
      req.on('response', (res) => {
        // The body is not kept; reading it to the end frees the connection.
        res.resume();
        let failure: string | null = null;
        res.on('error', (err: NodeJS.ErrnoException) => (failure = describeError(err)));
        // 'close' comes after 'end', and also when the response is cut off (the deadline).
        res.on('close', () => {
          clearTimeout(deadline);
          const retryAfter = res.headers['retry-after'];
          const error = res.complete ? null : (failure ?? 'the response was cut off');
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
