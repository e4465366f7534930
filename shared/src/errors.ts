// The one registry of API error types: HTTP status, whether a client may retry, and what
// the type means. Every non-2xx response body is `{error:{type,message,param?,code?}}`.
// docs/errors.md is checked against this table by a test.

export const ERROR_TYPES = {
  invalid_request: { status: 400, retryable: false, meaning: 'Malformed JSON, unsupported field or invalid value.' },
  unauthorized: { status: 401, retryable: false, meaning: 'Missing, malformed, unknown, revoked or rotated-out API key.' },
  insufficient_quota: { status: 402, retryable: false, meaning: 'A prepaid organization has no balance left, or a postpaid one reached its credit limit for the month; new billable work is refused until credit is added.' },
  quota_exceeded: { status: 403, retryable: false, meaning: "The organization's instances already hold as many GPUs as its quota allows; end one, or ask the provider to raise the quota." },
  forbidden_scope: { status: 403, retryable: false, meaning: 'The key lacks the scope the route requires, or its kind may not call the route.' },
  ip_not_allowed: { status: 403, retryable: false, meaning: "The source address is not in the organization's IP allowlist." },
  referrer_not_allowed: { status: 403, retryable: false, meaning: "A public key was used from an origin outside the organization's referrer allowlist." },
  not_found: { status: 404, retryable: false, meaning: 'No such route, instance, key or other resource.' },
  model_not_found: { status: 404, retryable: false, meaning: 'The model does not exist, may not be called by the organization, or is not in the pinned pool.' },
    method_not_allowed: { status: 405, retryable: false, meaning: 'The route exists but not for this HTTP method.' },
  request_timeout: { status: 408, retryable: true, meaning: 'The request line and headers did not arrive in time; the connection is closed.' },
  conflict: { status: 409, retryable: true, meaning: 'A request with the same idempotency key is still running (retry), or what the request creates already exists: a user\'s email in the org, an org name (`code` user_exists or name_taken; retrying will not help).' },
  no_capacity: { status: 409, retryable: true, meaning: 'No replica or GPU capacity is available in the requested pool.' },
  payload_too_large: { status: 413, retryable: false, meaning: 'The request body exceeds the size limit.' },
  unsupported_media_type: { status: 415, retryable: false, meaning: 'The request body is not application/json.' },
  rate_limited: { status: 429, retryable: true, meaning: 'Requests or tokens per minute (or the sandbox daily token cap) exceeded; back off and retry with jitter.' },
  headers_too_large: { status: 431, retryable: false, meaning: 'The request line (path and query string) and headers exceed 16 KB together.' },
  internal_error: { status: 500, retryable: true, meaning: 'An unexpected server error; the message carries a request id, never internals.' },
  pool_degraded: { status: 503, retryable: true, meaning: 'The pool is temporarily routing-degraded; retry with a different X-Service-Pool.' },
  service_unavailable: { status: 503, retryable: true, meaning: 'The service is starting or shutting down.' },
} as const;

export type ErrorType = keyof typeof ERROR_TYPES;

export interface ErrorBody {
  error: { type: ErrorType; message: string; param?: string | null; code?: string | null };
}

export interface ApiErrorOptions {
  param?: string;
  code?: string;
  /** Extra response headers, e.g. `retry-after`. */
  headers?: Record<string, string>;
}

export class ApiError extends Error {
  readonly type: ErrorType;
  readonly status: number;
  readonly retryable: boolean;
  readonly param: string | undefined;
  readonly code: string | undefined;
  readonly headers: Record<string, string>;

  constructor(type: ErrorType, message: string, options: ApiErrorOptions = {}) {
    super(message);
    this.name = 'ApiError';
    this.type = type;
    this.status = ERROR_TYPES[type].status;
    this.retryable = ERROR_TYPES[type].retryable;
    this.param = options.param;
    this.code = options.code;
    this.headers = options.headers ?? {};
  }

  toBody(): ErrorBody {
    const error: ErrorBody['error'] = { type: this.type, message: this.message };
    if (this.param !== undefined) error.param = this.param;
    if (this.code !== undefined) error.code = this.code;
    return { error };
  }
}

export function isApiError(value: unknown): value is ApiError {
  return value instanceof ApiError;
}

/** A setting (environment, config file, CLI context) that is missing or invalid: start-up stops with it. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
