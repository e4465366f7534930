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

export const ListOf = <T extends TSchema>(item: T) =>
  Type.Object({ object: Type.Literal('list'), data: Type.Array(item) });
