// Schema helpers shared by routes: string enums that validate with readable messages,
// the error envelope for the OpenAPI document, and list wrappers.
import { Type, type TSchema } from '@sinclair/typebox';

/** A string enum as JSON Schema `enum` (not anyOf), so errors read "must be one of". */
export const StringEnum = <const T extends readonly string[]>(values: T, options: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });

export const ErrorEnvelope = Type.Object(
  {
    error: Type.Object({
      type: Type.String(),
      message: Type.String(),
      param: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      code: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    }),
  },
  { $id: 'ErrorEnvelope', description: 'Every non-2xx response.' },
);

/** Response schemas for the OpenAPI document: the success shape plus the error envelope. */
export function responses(success: Record<number, TSchema>): Record<string, TSchema> {
  return { ...success, '4xx': Type.Ref(ErrorEnvelope), '5xx': Type.Ref(ErrorEnvelope) };
}

/**
 * Headers on every answer of a route that spends model tokens (OpenAI's names and
 * formats; pipeline/token-limit.ts sets them at admission).
 */
export const TOKEN_LIMIT_HEADERS = {
  'x-ratelimit-limit-tokens': { type: 'integer', description: "Tokens per minute this key may spend (its organization's tier)." },
  'x-ratelimit-remaining-tokens': {
    type: 'integer',
    description: "Tokens left in this minute's allowance after this request's estimate (prompt size / 4 plus its output bound), settled against real usage later.",
  },
  'x-ratelimit-reset-tokens': { type: 'string', description: 'Until the allowance is whole again, as OpenAI writes it (e.g. 250ms, 1s, 6m0s).' },
} as const;

const RETRY_HEADERS = {
  'retry-after': { type: 'integer', description: 'Seconds to wait before retrying.' },
  'retry-after-ms': { type: 'integer', description: 'Milliseconds to wait before retrying (read by the official OpenAI SDKs).' },
} as const;

/**
 * responses() for the routes that spend model tokens: the answer carries the token-limit
 * headers, and a 429 (requests or tokens per minute exceeded) carries them with
 * retry-after, in the error envelope.
 */
export function tokenLimitedResponses(success: TSchema, description = 'OK') {
  return {
    ...responses({}),
    200: { description, headers: TOKEN_LIMIT_HEADERS, content: { 'application/json': { schema: success } } },
    429: {
      description:
        "rate_limited: this key's requests or tokens per minute are spent (a request needing more tokens than the whole limit gets it too); retry after retry-after.",
      headers: { ...TOKEN_LIMIT_HEADERS, ...RETRY_HEADERS },
      content: { 'application/json': { schema: Type.Ref(ErrorEnvelope) } },
    },
  };
}

export const ListOf = <T extends TSchema>(item: T) =>
  Type.Object({ object: Type.Literal('list'), data: Type.Array(item) });
