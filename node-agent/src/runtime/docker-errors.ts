// Reads dockerode's errors (an Error with the HTTP `statusCode` and Docker's message) and
// maps them to RuntimeErrors, so "not found" and "not running" are decided in one place.
import { RuntimeError, type RuntimeErrorCode } from './runtime.js';

/** The HTTP status Docker answered with; undefined when the engine was not reached. */
export const dockerStatus = (err: unknown): number | undefined =>
  (err as { statusCode?: number } | null)?.statusCode;

export const dockerMessage = (err: unknown): string => {
  // dockerode puts Docker's own text in `json.message` and prefixes `message` with the HTTP code.
  // (`json` is null when Docker answered without a JSON content type, as pulls do).
  const json = (err as { json?: { message?: unknown } } | null)?.json;
  if (json && typeof json.message === 'string') return json.message;
  const message = err instanceof Error ? err.message : String(err);
  const docker = message.replace(/^\(HTTP code \d+\) [^-]*- /, '').trim();
  return docker || message.trim();
};

export const isNotFound = (err: unknown): boolean => dockerStatus(err) === 404;

/** kill answers 409 "is not running"; stop answers 304. */
export const isNotRunning = (err: unknown): boolean =>
  dockerStatus(err) === 304 || (dockerStatus(err) === 409 && /is not running/i.test(dockerMessage(err)));

/** A second remove while the first is still in progress. */
export const isRemovalInProgress = (err: unknown): boolean =>
  dockerStatus(err) === 409 && /removal .* already in progress/i.test(dockerMessage(err));

/** No HTTP answer (socket closed, timeout) or a server error may go away on retry. */
const isTransient = (err: unknown): boolean => {
  const status = dockerStatus(err);
  return status === undefined || status >= 500;
};

// Registry answers that retrying will not change.
const PERMANENT_PULL_FAILURE =
  /not found|manifest unknown|unauthorized|denied|invalid reference|repository does not exist|no matching manifest/i;

/** The most of Docker's text a pull failure passes on to the tenant. */
const PULL_MESSAGE_MAX = 400;

/**
 * Docker's pull error without what the far end answered. A registry's error body is quoted
 * whole ("error parsing HTTP 404 response body: ...: \"<html>...\""), and the far end is not
 * always the tenant's registry: its token service may be any URL the registry names,
 * including one on the node's own network, and the tenant reads the failure back.
 */
export function pullMessage(message: string): string {
  const quiet = message.replace(/(response body: [^"]*?): "(?:[^"\\]|\\.)*"/g, '$1 (body not shown)');
  return quiet.length > PULL_MESSAGE_MAX ? `${quiet.slice(0, PULL_MESSAGE_MAX)}…` : quiet;
}

export function pullFailed(image: string, err: unknown): RuntimeError {
  const message = pullMessage(dockerMessage(err));
  const permanent = dockerStatus(err) === 404 || PERMANENT_PULL_FAILURE.test(message);
  return new RuntimeError('pull_failed', `pull of ${image} failed: ${message}`, !permanent, { cause: err });
}

/** Create and start errors: 4xx and Docker's 500s for a bad config are not retried. */
export function taskFailed(code: RuntimeErrorCode, what: string, err: unknown): RuntimeError {
  return new RuntimeError(code, `${what}: ${dockerMessage(err)}`, dockerStatus(err) === undefined, { cause: err });
}

export function engineError(what: string, err: unknown): RuntimeError {
  return new RuntimeError('engine_error', `${what}: ${dockerMessage(err)}`, isTransient(err), { cause: err });
}

export function notFound(id: string, err?: unknown): RuntimeError {
  return new RuntimeError('not_found', `no such container: ${id}`, false, { cause: err });
}
