// Request bodies: JSON only, parsed with prototype-poisoning checks, and no deeper than
// MAX_JSON_DEPTH. The depth bound is an edge limit: code after the parser (validation,
// tool-schema checks, the idempotency hash) walks bodies recursively, and a body of
// 200,000 nested objects fits in a few MB.
import secureJson from 'secure-json-parse';
import { ApiError } from '@svc/shared';

/** Deeper than any real request (a tool's JSON Schema nests a dozen levels at most). */
export const MAX_JSON_DEPTH = 64;

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether the JSON text nests objects and arrays deeper than `max`. One pass over the
 * text, before parsing; brackets inside strings do not count. Malformed text is left to
 * the parser to name.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > max) return true;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth--;
  }
  return false;
}

/**
 * The parsed body, or the API error for a body that is not acceptable JSON. A compressed
 * body is refused (415, as RFC 9110 allows) rather than read as if it were plain: bodies
 * are small next to what they cost to serve, and inflating them would be one more bound to
 * keep (a gzip bomb).
 */
export function parseJsonBody(text: string, contentEncoding?: string): unknown {
  if (contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity') {
    throw new ApiError('unsupported_media_type', `Content-Encoding ${contentEncoding} is not accepted: send the JSON body uncompressed`);
  }
  // An empty body is an empty object: validation then names the missing fields.
  if (text === '') return {};
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new ApiError('invalid_request', `JSON body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`);
  }
  try {
    return secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    throw new ApiError('invalid_request', `malformed JSON body: ${(err as Error).message}`);
  }
}
