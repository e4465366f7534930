// Request validation: one Ajv for bodies (no type coercion, unknown fields refused) and
// one for query strings, path parameters and headers (strings coerced to the schema's
// types). Schemas carry `additionalProperties: false`; nothing is silently removed.
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsImport from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { ApiError } from '@svc/shared';

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

function makeAjv(coerceTypes: boolean | 'array', externalSchemas: Record<string, unknown>): Ajv {
  const ajv = new Ajv({ coerceTypes, useDefaults: true, removeAdditional: false, allErrors: false, strict: false });
  addFormats(ajv);
  for (const schema of Object.values(externalSchemas)) ajv.addSchema(schema as object);
  return ajv;
}

/**
 * Fastify's `schemaController.compilersFactory.buildValidator`. Set as a server option
 * (not with setValidatorCompiler, which a child context that adds schemas forgets).
 */
export function buildValidator(externalSchemas: Record<string, unknown> = {}): FastifySchemaCompiler<unknown> {
  const bodyAjv = makeAjv(false, externalSchemas);
  const paramAjv = makeAjv('array', externalSchemas);
  return ({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : paramAjv).compile(schema as object);
}

/** `/messages/0/role` -> `messages[0].role` (the way OpenAI names a `param`). */
export function paramFromPointer(pointer: string, child?: string): string | undefined {
  const parts = pointer.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (child !== undefined) parts.push(child);
  let out = '';
  for (const part of parts) out += /^\d+$/.test(part) ? `[${part}]` : out === '' ? part : `.${part}`;
  return out === '' ? undefined : out;
}

const PART_NAMES: Record<string, string> = {
  body: 'request body',
  querystring: 'query string',
  params: 'path',
  headers: 'headers',
};

/** The first validation failure as the API's error, naming the offending field in `param`. */
export function validationError(errors: ErrorObject[], context: string | undefined): ApiError {
  // For unions Ajv reports each branch first and the anyOf/oneOf last; the last one is the meaningful one.
  const union = errors.find((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf');
  const error = union ?? errors[0];
  const where = PART_NAMES[context ?? 'body'] ?? 'request';
  if (!error) return new ApiError('invalid_request', `invalid ${where}`);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required': {
      const param = paramFromPointer(error.instancePath, String(params.missingProperty));
      return new ApiError('invalid_request', `missing required field: ${param}`, { param: param! });
    }
    case 'additionalProperties': {
      // A query string such as `?=x` or `?&&&=` has a field with an empty name; say so.
      const name = String(params.additionalProperty);
      const param = paramFromPointer(error.instancePath, name) ?? JSON.stringify(name);
      return new ApiError('invalid_request', `unsupported field: ${param}`, { param });
    }
    default: {
      const param = paramFromPointer(error.instancePath);
      const subject = param ?? where;
      let message = `${subject} ${error.message ?? 'is invalid'}`;
      if (error.keyword === 'enum') message = `${subject} must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
      if (union) message = `${subject} has an invalid type or value`;
      if (error.keyword === 'type' && param === undefined && context === 'body') message = 'request body must be a JSON object';
      return new ApiError('invalid_request', message, param === undefined ? {} : { param });
    }
  }
}
