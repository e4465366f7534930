// Step 7: `X-Service-Idempotency-Key` on every POST, scoped to the calling key.
//  - same key, same body, within the window: the stored response (success or error,
//    once execution began) is replayed with `X-Service-Idempotent-Replay: true`;
//  - same key while the first request still runs: wait for it, then replay; past the
//    wait, 409 `conflict`;
//  - same key, different body: 400 `invalid_request`, code `idempotency_key_reused`.
// It runs after validation, so requests that fail validation are never stored.
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type Clock } from '@svc/shared';
import type { StoredResponse } from '../store/records.js';
import type { IdempotencyStore } from '../store/store.js';
import { canonicalJson } from './canonical-json.js';

export const IDEMPOTENCY_HEADER = 'x-service-idempotency-key';
export const REPLAY_HEADER = 'x-service-idempotent-replay';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Another process may hold the claim; look at the store this often while waiting. */
const POLL_MS = 100;
/** Response headers worth replaying; the rest (ids, rate limits) belong to the new request. */
const REPLAYED_HEADERS = ['content-type', 'location', 'deprecation', 'sunset'];

export interface IdempotencyOptions {
  windowSeconds: number;
  waitSeconds: number;
}

export class Idempotency {
  /** Wakes waiters in this process as soon as the owner stores its response. */
  private readonly finished = new EventEmitter();

  constructor(
    private readonly store: IdempotencyStore,
    private readonly clock: Clock,
    private readonly options: IdempotencyOptions,
  ) {
    this.finished.setMaxListeners(0);
  }

  /** preHandler: claims the key, or answers from what holds it. */
  readonly claim = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (request.method !== 'POST') return;
    const raw = request.headers[IDEMPOTENCY_HEADER];
    if (raw === undefined) return;
    const idemKey = Array.isArray(raw) ? raw[0] : raw;
    if (!idemKey || !UUID.test(idemKey)) {
      throw new ApiError('invalid_request', 'X-Service-Idempotency-Key must be a UUID', { param: 'X-Service-Idempotency-Key' });
    }
    const keyId = request.principal!.key.id;
    const path = request.url.split('?')[0];
    const requestHash = createHash('sha256').update(`${request.method} ${path}\n${canonicalJson(request.body)}`).digest('hex');

    const deadline = this.clock.now() + this.options.waitSeconds * 1000;
    for (;;) {
      const now = this.clock.now();
      const outcome = await this.store.begin(keyId, idemKey, requestHash, now, now + this.options.windowSeconds * 1000);
      switch (outcome.state) {
        case 'started':
          request.idempotencyClaim = { keyId, idemKey };
          return;
        case 'mismatch':
          throw new ApiError(
            'invalid_request',
            'this X-Service-Idempotency-Key was already used with a different request body',
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
  };

  /** onSend: stores what the owner answered, so a retry gets the same answer. */
  readonly record = async (request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    const claim = request.idempotencyClaim;
    if (!claim) return payload;
    request.idempotencyClaim = null;
    if (typeof payload === 'string' || Buffer.isBuffer(payload)) {
      const headers: Record<string, string> = {};
      for (const name of REPLAYED_HEADERS) {
        const value = reply.getHeader(name);
        if (value !== undefined) headers[name] = String(value);
      }
      const response: StoredResponse = { statusCode: reply.statusCode, headers, body: payload.toString() };
      await this.store.complete(claim.keyId, claim.idemKey, response);
    } else {
      // A stream (SSE) cannot be replayed; free the key rather than replay something else.
      await this.store.release(claim.keyId, claim.idemKey);
    }
    this.finished.emit(`${claim.keyId}:${claim.idemKey}`);
    return payload;
  };

  /** onResponse: a claim still held here means nothing was sent (aborted); free it. */
  readonly releaseAbandoned = async (request: FastifyRequest): Promise<void> => {
    const claim = request.idempotencyClaim;
    if (!claim) return;
    request.idempotencyClaim = null;
    await this.store.release(claim.keyId, claim.idemKey);
    this.finished.emit(`${claim.keyId}:${claim.idemKey}`);
  };

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
