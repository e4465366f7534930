// HTTP to model-server replicas: one keep-alive connection pool per replica (undici),
// bounded waits at every step (connect, first byte, between body chunks) so a stuck
// replica can never hang a request, and failures sorted into what the router must know:
// the replica is broken (eject it, try another) or the request is (tell the caller).
import { Agent, errors, request, type Dispatcher } from 'undici';
import { ApiError } from '@svc/shared';
import type { ClientDeparture } from './client-departure.js';

export interface UpstreamOptions {
  connectTimeoutMs: number;
  /** Until the response head arrives (a non-streamed completion is generated meanwhile). */
  headersTimeoutMs: number;
  /** Longest silence between two body chunks. */
  bodyTimeoutMs: number;
  /** Connections kept per replica. */
  connections: number;
}

/**
 * The replica could not serve (unreachable, timed out, 5xx, misrouted): retry elsewhere,
 * and eject it (`replica`) or have it probed (`unclear`: the request may be what failed).
 */
export class ReplicaFailure extends Error {
  override readonly name = 'ReplicaFailure';
  constructor(
    message: string,
    /** True when the replica may still be working on it (it timed out): no retry elsewhere. */
    readonly started: boolean,
    /** Whose fault: the router ejects for `replica` and only suspects for `unclear`. */
    readonly blame: 'replica' | 'unclear' = 'unclear',
  ) {
    super(message);
  }
}

/** Errors that say the replica is not there, whatever was asked of it. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENOTFOUND', 'UND_ERR_CONNECT_TIMEOUT']);

/** Where a replica answers and the key it requires (a LiveReplica is one). */
export interface UpstreamTarget {
  baseUrl: string;
  apiKey: string | undefined;
}

export interface UpstreamResponse {
  statusCode: number;
  body: Dispatcher.ResponseData['body'];
}

export class UpstreamClient {
  private readonly agent: Agent;
  private readonly bases = new Map<string, { origin: string; prefix: string }>();

  constructor(private readonly options: UpstreamOptions) {
    this.agent = new Agent({
      connections: options.connections,
      connectTimeout: options.connectTimeoutMs,
      headersTimeout: options.headersTimeoutMs,
      bodyTimeout: options.bodyTimeoutMs,
      keepAliveTimeout: 30_000,
    });
  }

  /**
   * POSTs JSON with the replica's bearer and returns the response once its head arrived and
   * says 2xx. A 4xx is the request's fault and becomes the API error to answer, except 401
   * and 403: those say the replica refused our key (a replica of someone else now on that
   * port, or a misconfiguration), which no client can fix. Anything else is a ReplicaFailure.
   */
  async post(replica: UpstreamTarget, path: string, payload: unknown, signal?: ClientDeparture): Promise<UpstreamResponse> {
    const { baseUrl } = replica;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (replica.apiKey !== undefined) headers.authorization = `Bearer ${replica.apiKey}`;
    // Serialized before the call: a body that cannot be made is our failure, never the replica's.
    const body = JSON.stringify(payload);
    let response: Dispatcher.ResponseData;
    try {
      const { origin, path: targetPath } = this.target(baseUrl, path);
      // An object literal, not `{ ...target, ... }`: with the spread, about three times as much
      // of each request's memory outlived a young-generation collection (measured, see
      // docs/scaling.md), which lengthened every pause behind the chat path's p99.
      response = await this.agent.request({ origin, path: targetPath, method: 'POST', headers, body, signal: signal ?? null });
    } catch (err) {
      if (signal?.aborted) throw err;
      const unreachable = err instanceof errors.ConnectTimeoutError || UNREACHABLE.has((err as { code?: string }).code ?? '');
      throw new ReplicaFailure(`replica ${baseUrl} did not answer: ${describe(err)}`, err instanceof errors.HeadersTimeoutError, unreachable ? 'replica' : 'unclear');
    }
    if (response.statusCode < 300) return response;
    const text = await response.body.text().catch(() => '');
    const replicaFault = response.statusCode === 401 || response.statusCode === 403 || response.statusCode === 404;
    if (response.statusCode >= 400 && response.statusCode < 500 && !replicaFault) {
      throw requestError(response.statusCode, text);
    }
    throw new ReplicaFailure(`replica ${baseUrl} answered ${response.statusCode}: ${text.slice(0, 200)}`, false, replicaFault ? 'replica' : 'unclear');
  }

  /**
   * The origin and path of `baseUrl + path`, parsed once per replica: a URL parse on every
   * request is measurable on the hot path, and a base URL may carry a path prefix.
   */
  private target(baseUrl: string, path: string): { origin: string; path: string } {
    let base = this.bases.get(baseUrl);
    if (!base) {
      const url = new URL(baseUrl);
      base = { origin: url.origin, prefix: url.pathname.replace(/\/$/, '') };
      // Replicas come and go; the map stays bounded by the ones seen recently.
      if (this.bases.size >= 1024) this.bases.clear();
      this.bases.set(baseUrl, base);
    }
    return { origin: base.origin, path: base.prefix + path };
  }

  /** True when `baseUrl + path` answers 2xx within `timeoutMs`. */
  async probe(baseUrl: string, path: string, timeoutMs: number): Promise<boolean> {
    try {
      const response = await request(baseUrl + path, { dispatcher: this.agent, signal: AbortSignal.timeout(timeoutMs) });
      await response.body.dump();
      return response.statusCode >= 200 && response.statusCode < 300;
    } catch {
      return false;
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

function describe(err: unknown): string {
  if (err instanceof errors.ConnectTimeoutError) return 'connect timeout';
  if (err instanceof errors.HeadersTimeoutError) return 'no response in time';
  const code = (err as { code?: string }).code;
  return code ? `${code}` : err instanceof Error ? err.message : String(err);
}

/** A replica's 4xx as our error: its message and param carried over, the type ours. */
function requestError(status: number, text: string): ApiError {
  let message = `the model server refused the request (${status})`;
  let param: string | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; param?: unknown } | string; message?: unknown };
    const error = typeof parsed.error === 'object' ? parsed.error : undefined;
    const upstreamMessage = error?.message ?? (typeof parsed.error === 'string' ? parsed.error : parsed.message);
    if (typeof upstreamMessage === 'string' && upstreamMessage) message = upstreamMessage;
    if (typeof error?.param === 'string' && error.param) param = error.param;
  } catch {
    if (text) message = `${message}: ${text.slice(0, 200)}`;
  }
  if (status === 429) return new ApiError('no_capacity', `the replica is saturated: ${message}`);
  return new ApiError('invalid_request', message, param ? { param } : {});
}
