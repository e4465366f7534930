// Every failure leaves as the error envelope. Client mistakes keep their status and get
// a clear message; anything unexpected is a 500 that names only the request id.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import FindMyWay from 'find-my-way';
import { ApiError, ERROR_TYPES, type ErrorType } from '@svc/shared';
import { validationError } from './validation.js';

const TYPE_BY_STATUS: Record<number, ErrorType> = {
  400: 'invalid_request',
  401: 'unauthorized',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'request_timeout',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  431: 'headers_too_large',
  503: 'service_unavailable',
};

const FASTIFY_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'Content-Type must be application/json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'request body is too large',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'Content-Length does not match the body',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'request body is empty',
};

export function toApiError(error: FastifyError & { validation?: unknown; validationContext?: string }): ApiError | undefined {
  if (error instanceof ApiError) return error;
  if (Array.isArray(error.validation)) return validationError(error.validation, error.validationContext);
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const type = TYPE_BY_STATUS[status] ?? 'invalid_request';
    const message = (error.code && FASTIFY_MESSAGES[error.code]) || error.message;
    return new ApiError(type, message);
  }
  return undefined;
}

/**
 * OpenAI's `code` for the errors a client library tells apart by it (the official SDKs
 * expose it as `err.code`, LangChain and others branch on it), where the error has none
 * of its own. The `type` stays ours (docs/errors.md).
 */
const OPENAI_CODES: Partial<Record<ErrorType, string>> = {
  unauthorized: 'invalid_api_key',
  rate_limited: 'rate_limit_exceeded',
  model_not_found: 'model_not_found',
  insufficient_quota: 'insufficient_quota',
};

function send(reply: FastifyReply, error: ApiError): FastifyReply {
  for (const [name, value] of Object.entries(error.headers)) reply.header(name, value);
  const body = error.toBody();
  const code = OPENAI_CODES[error.type];
  if (code !== undefined && body.error.code === undefined) body.error.code = code;
  return reply.code(error.status).type('application/json; charset=utf-8').send(body);
}

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const apiError = toApiError(error);
  if (apiError) {
    // A 5xx the code chose (pool degraded, shutting down) is an operating condition, not a bug.
    if (apiError.status >= 500) request.log.warn({ type: apiError.type, why: apiError.message }, 'request refused');
    return send(reply, apiError);
  }
  request.log.error({ err: error }, 'unexpected error');
  return send(reply, new ApiError('internal_error', `internal error; quote request id ${request.id} when reporting it`));
}

/**
 * Errors fastify's router raises before any hook runs (its `frameworkErrors` option):
 * a path with broken percent-encoding (`/v1/instances/%ff`) or a path parameter past
 * the router's 100 characters. No id is that long, so neither names a resource.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.header('x-request-id', request.id);
  const path = (request.raw.url ?? '/').split('?')[0] ?? '/';
  const shown = path.length > 120 ? `${path.slice(0, 120)}...` : path;
  if (error.code === 'FST_ERR_BAD_URL') return send(reply, new ApiError('invalid_request', `the path ${shown} is not valid percent-encoded UTF-8`));
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return send(reply, new ApiError('invalid_request', `a path segment of ${shown} is longer than 100 characters; no id is that long`));
  }
  request.log.error({ err: error }, 'unexpected router error');
  return send(reply, new ApiError('internal_error', `internal error; quote request id ${request.id} when reporting it`));
}

/**
 * Once the server is closing, requests still arriving on open connections get 503
 * `service_unavailable` in the envelope (fastify's own `return503OnClosing` answer is
 * not), with `Connection: close` so clients reconnect elsewhere.
 */
export function installClosingGuard(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // A callback hook: the common case (not closing) costs no promise per request.
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    reply.header('connection', 'close');
    send(reply, new ApiError('service_unavailable', 'the server is shutting down; retry on a new connection'));
  });
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * Unknown routes answer 404 `not_found`; a known path with the wrong method answers 405
 * with `Allow`. Fastify's router cannot tell these apart, so routes are mirrored into a
 * second router that only answers "does this path exist for that method".
 */
export function installNotFound(app: FastifyInstance): void {
  const mirror = FindMyWay();
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if ((METHODS as readonly string[]).includes(method)) mirror.on(method as (typeof METHODS)[number], route.url, () => {});
    }
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = METHODS.filter((m) => m !== request.method && mirror.find(m, path) !== null);
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return send(reply, new ApiError('method_not_allowed', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`));
    }
    return send(reply, new ApiError('not_found', `no route ${request.method} ${path}`));
  });
}

export const errorStatus = (type: ErrorType): number => ERROR_TYPES[type].status;
