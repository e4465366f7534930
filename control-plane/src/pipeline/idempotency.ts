// Step 7: `X-Service-Idempotency-Key` on every POST, scoped to the calling key.
//  - same key, same request, within the window: the stored response (success or error,
//    once execution began) is replayed with `X-Service-Idempotent-Replay: true`;
//  - same key while the first request still runs: wait for it, then replay; past the
//    wait, 409 `conflict`;
//  - same key, different request (body, or a header that changes what it does such as
//    X-Service-Pool): 400 `invalid_request`, code `idempotency_key_reused`;
//  - errors that say nothing was done and ask for a retry (no capacity, pool degraded,
//    unavailable) are not stored, so the retry they ask for runs;
//  - secrets in an answer (key values, webhook secrets) are never stored: a replay
//    carries `<field>: null, <field>_redacted: true`;
//  - an answer larger than `maxAnswerBytes` is sent but not stored, and the key is
//    released as a stream's is: a retry runs again;
//  - a claim is held under a lease its process renews; a claim whose process died is
//    taken over. Routes that create durable things store their answer in the same
//    transaction as the work (`storedCompletion`), so a crash leaves both or neither.
// It runs after validation, so requests that fail validation are never stored. A stored
// answer is replayed before the balance check (`replayStored`), the key claimed after it
// (`claim`): a retry of work done is answered as it was, a refused request claims nothing.
import { createHash, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { ApiError, type Clock } from '@svc/shared';
import type { IdempotencyCompletion, StoredResponse } from '../store/records.js';
import type { IdempotencyStore } from '../store/store.js';
import { canonicalJson } from './canonical-json.js';
import { redactSecrets } from './redact-secrets.js';

export const IDEMPOTENCY_HEADER = 'x-service-idempotency-key';
export const REPLAY_HEADER = 'x-service-idempotent-replay';
/** Request headers that change what a request does, so they are part of its identity. */
export const FINGERPRINT_HEADERS = ['x-service-pool'] as const;
/**
 * Error types that promise nothing was done and ask for a retry (maybe elsewhere, or once
 * credit is added): never stored. A stored 402 had a client that topped up and retried with
 * the same key refused again for the whole window.
 */
export const RETRY_ASKING_ERRORS: ReadonlySet<string> = new Set(['conflict', 'insufficient_quota', 'no_capacity', 'pool_degraded', 'rate_limited', 'service_unavailable']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Another process may hold the claim; look at the store this often while waiting. */
const POLL_MS = 100;
/** Response headers worth replaying; the rest (ids, rate limits) belong to the new request. */
const REPLAYED_HEADERS = ['content-type', 'location', 'deprecation', 'sunset'];
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

export interface IdempotencyOptions {
  windowSeconds: number;
  waitSeconds: number;
  /** A claim not renewed for this long counts as abandoned (its process died). */
  leaseSeconds: number;
  /** The largest answer stored for a replay; a larger one releases the key. */
  maxAnswerBytes: number;
}

export interface IdempotencyClaim {
  keyId: string;
  idemKey: string;
  claim: string;
}

/**
 * For each claim held, when an answer stored now stops being replayed: a window from the
 * answer, not from the claim (a request may run longer than the window). Kept beside the
 * claim rather than on it so `storedCompletion`, which the routes call, reads the window
 * of the Idempotency that made the claim.
 */
const answerExpiries = new WeakMap<IdempotencyClaim, () => number>();

/**
 * The identity of a request under one idempotency key: method, path, the headers that
 * change what it does, and the body after validation (defaults applied, key order ignored).
 */
export function requestFingerprint(method: string, path: string, headers: Record<string, string | string[] | undefined>, body: unknown, query: unknown = {}): string {
  const hash = createHash('sha256').update(`${method} ${path}\n`);
  // The query as validated (`?force=true` is `{ force: true }`); none hashes as before it was counted.
  if (query && typeof query === 'object' && Object.keys(query).length > 0) hash.update(`?${canonicalJson(query)}\n`);
  for (const name of FINGERPRINT_HEADERS) {
    const value = headers[name];
    hash.update(`${name}: ${(Array.isArray(value) ? value.join(',') : (value ?? '')).trim().toLowerCase()}\n`);
  }
  return hash.update(canonicalJson(body)).digest('hex');
}

/** True for an answer a retry must not be given again: an error that asks to be retried. */
export function asksForRetry(statusCode: number, body: string): boolean {
  if (statusCode < 400) return false;
  try {
    const type = (JSON.parse(body) as { error?: { type?: unknown } }).error?.type;
    return typeof type === 'string' && RETRY_ASKING_ERRORS.has(type);
  } catch {
    return false;
  }
}

/** What becomes of an answer a claim sent: stored for replays, or not (and the key released). */
export type AnswerFate = 'store' | 'stream' | 'retry' | 'too_large';

/**
 * A stream (SSE) cannot be replayed; an error asking for a retry must not be; an answer
 * over `maxBytes` is not kept: its size is not bounded by the request's (2,048 one-letter
 * embedding inputs, an 8 KB body, answer several MB), so stored answers could fill the
 * database's disk at the rate limit's pace.
 */
export function answerFate(statusCode: number, payload: unknown, maxBytes: number): AnswerFate {
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return 'stream';
  if (Buffer.byteLength(payload) > maxBytes) return 'too_large';
  return asksForRetry(statusCode, payload.toString()) ? 'retry' : 'store';
}

/**
 * The answer to write in the same transaction as the work a request does, for stores
 * that take one (instance create, extend); null when the request holds no claim.
 */
export function storedCompletion(request: FastifyRequest, statusCode: number, body: unknown): IdempotencyCompletion | null {
  const held = request.idempotencyClaim;
  if (!held) return null;
  const secrets = request.routeOptions.config.secretFields ?? [];
  return {
    keyId: held.keyId,
    idemKey: held.idemKey,
    claim: held.claim,
    response: { statusCode, headers: { 'content-type': JSON_CONTENT_TYPE }, body: redactSecrets(JSON.stringify(body), secrets) },
    expiresAt: answerExpiries.get(held)!(),
  };
}

interface KeyedRequest {
  keyId: string;
  idemKey: string;
  requestHash: string;
  /** Past this, a request still finding its key in progress gets 409. */
  deadline: number;
}

export class Idempotency {
  /** Wakes waiters in this process as soon as the owner stores its response. */
  private readonly finished = new EventEmitter();
  /** This process, as the owner of its claims' leases. */
  private readonly owner = randomUUID();
  private held = 0;
  private readonly keyed = new WeakMap<FastifyRequest, KeyedRequest>();

  constructor(
    private readonly store: IdempotencyStore,
    private readonly clock: Clock,
    private readonly options: IdempotencyOptions,
  ) {
    this.finished.setMaxListeners(0);
  }

  private readonly answerExpiry = (): number => this.clock.now() + this.options.windowSeconds * 1000;

  /** Keeps this process's claims alive; call more often than the lease (app.ts: a third of it). */
  async renewLeases(): Promise<void> {
    if (this.held > 0) await this.store.renew(this.owner, this.clock.now() + this.options.leaseSeconds * 1000);
  }

  // The hooks are callback hooks: most requests send no key and hold no claim, and pass
  // each one synchronously, with no promise or microtask (the chat path's cost is
  // benchmarked). Only a request that names a key takes the asynchronous path.

  /**
   * preHandler, before the balance checks: answers a request whose key already has an
   * answer (waiting for one in progress), and claims nothing. A retry of a request that
   * ran is answered as it was even if the org may no longer spend: the create that took
   * the last of its balance had been answered 402 on retry, and a client trusting that
   * would top up and create a second instance.
   */
  readonly replayStored = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const raw = request.headers[IDEMPOTENCY_HEADER];
    if (request.method !== 'POST' || raw === undefined) return done();
    this.settle(request, reply, raw, false).then(() => done(), done);
  };

  /** preHandler, last: claims the key, or answers from what holds it. */
  readonly claim = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const raw = request.headers[IDEMPOTENCY_HEADER];
    if (request.method !== 'POST' || raw === undefined) return done();
    this.settle(request, reply, raw, true).then(() => done(), done);
  };

  /** The key and identity of a request, worked out once for both hooks, and how long it may wait in all. */
  private identify(request: FastifyRequest, raw: string | string[]): KeyedRequest {
    const known = this.keyed.get(request);
    if (known) return known;
    const idemKey = Array.isArray(raw) ? raw[0] : raw;
    if (!idemKey || !UUID.test(idemKey)) {
      throw new ApiError('invalid_request', 'X-Service-Idempotency-Key must be a UUID', { param: 'X-Service-Idempotency-Key' });
    }
    const keyed: KeyedRequest = {
      keyId: request.principal!.key.id,
      idemKey,
      requestHash: requestFingerprint(request.method, request.url.split('?')[0]!, request.headers, request.body, request.query),
      deadline: this.clock.now() + this.options.waitSeconds * 1000,
    };
    this.keyed.set(request, keyed);
    return keyed;
  }

  /**
   * Answers from the store (a replay, a 400 for another request, a 409 after waiting too
   * long) or returns: with the key claimed when `claim`, else with nothing found. A replay
   * returns the reply, a thenable: the hook calls `done` once it is sent, and fastify then
   * runs no further hook and no handler.
   */
  private async settle(request: FastifyRequest, reply: FastifyReply, raw: string | string[], claim: boolean): Promise<void> {
    const { keyId, idemKey, requestHash, deadline } = this.identify(request, raw);
    for (;;) {
      const now = this.clock.now();
      const token = randomUUID();
      const outcome = claim
        ? await this.store.begin(keyId, idemKey, requestHash, now, now + this.options.windowSeconds * 1000, {
            owner: this.owner,
            claim: token,
            leaseUntil: now + this.options.leaseSeconds * 1000,
          })
        : await this.store.find(keyId, idemKey, requestHash, now);
      switch (outcome.state) {
        case 'absent':
          return;
        case 'started':
          if (outcome.takenOver) request.log.warn({ idemKey }, 'took over an idempotency claim whose process stopped renewing it');
          request.idempotencyClaim = { keyId, idemKey, claim: token };
          answerExpiries.set(request.idempotencyClaim, this.answerExpiry);
          this.held++;
          return;
        case 'mismatch':
          throw new ApiError(
            'invalid_request',
            'this X-Service-Idempotency-Key was already used with a different request (body or X-Service-Pool)',
            { param: 'X-Service-Idempotency-Key', code: 'idempotency_key_reused' },
          );
        case 'completed':
          return this.replay(reply, outcome.response);
        case 'in_progress':
          if (this.clock.now() >= deadline) {
            throw new ApiError('conflict', 'a request with this X-Service-Idempotency-Key is still in progress; retry later');
          }
          await this.waitForOwner(`${keyId}:${idemKey}`);
      }
    }
  }

  /** onSend: stores what the owner answered, so a retry gets the same answer. */
  readonly record = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, payload?: unknown) => void): void => {
    const held = this.letGo(request);
    if (!held) return done(null, payload);
    this.storeAnswer(request, reply, payload, held).then(() => done(null, payload), done);
  };

  private async storeAnswer(request: FastifyRequest, reply: FastifyReply, payload: unknown, held: IdempotencyClaim): Promise<void> {
    try {
      const fate = answerFate(reply.statusCode, payload, this.options.maxAnswerBytes);
      if (fate === 'store') {
        const headers: Record<string, string> = {};
        for (const name of REPLAYED_HEADERS) {
          const value = reply.getHeader(name);
          if (value !== undefined) headers[name] = String(value);
        }
        const body = redactSecrets(String(payload), request.routeOptions.config.secretFields ?? []);
        const response: StoredResponse = { statusCode: reply.statusCode, headers, body };
        await this.store.complete(held.keyId, held.idemKey, held.claim, response, this.answerExpiry());
      } else {
        if (fate === 'too_large') request.log.info({ idemKey: held.idemKey, bytes: Buffer.byteLength(payload as string | Buffer) }, 'answer too large to keep for an idempotent replay: key released');
        // Free the key, so a retry runs again (an answer stored with the work stays).
        await this.store.release(held.keyId, held.idemKey, held.claim);
      }
    } finally {
      this.finished.emit(`${held.keyId}:${held.idemKey}`);
    }
  }

  /** onResponse: a claim still held here means nothing was sent (aborted); free it. */
  readonly releaseAbandoned = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const held = this.letGo(request);
    if (!held) return done();
    this.store.release(held.keyId, held.idemKey, held.claim).finally(() => this.finished.emit(`${held.keyId}:${held.idemKey}`)).then(() => done(), done);
  };

  private letGo(request: FastifyRequest): IdempotencyClaim | null {
    const held = request.idempotencyClaim;
    if (!held) return null;
    request.idempotencyClaim = null;
    this.held--;
    return held;
  }

  private replay(reply: FastifyReply, response: StoredResponse): FastifyReply {
    reply.code(response.statusCode);
    for (const [name, value] of Object.entries(response.headers)) reply.header(name, value);
    reply.header(REPLAY_HEADER, 'true');
    // Already serialized: send the stored bytes untouched.
    return reply.serializer((body: unknown) => String(body)).send(response.body);
  }

  private waitForOwner(event: string): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.finished.off(event, done);
        resolve();
      };
      const timer = setTimeout(done, POLL_MS);
      this.finished.once(event, done);
    });
  }
}
