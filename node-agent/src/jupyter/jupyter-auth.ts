// Who may use an instance's Jupyter endpoint: requests carrying the instance's token, as
// Jupyter itself accepts it (`?token=`, `Authorization: token ...`), or the cookie the
// proxy sets once a browser came with the token (Jupyter's own pages make requests that
// carry cookies, not the token). A cookie is ambient, so a request it authorizes must come
// from the instance's own origin: browsers send cookies to every port of a host, and a
// page on another instance's port (another tenant's Jupyter) must not ride on it.
// Pure functions over the request's URL and headers.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { parseCookie, stringifySetCookie } from 'cookie';

/** `/<instance id>/rest...` -> the instance id; undefined when the path names none. */
export function instanceOfPath(url: string): string | undefined {
  const match = /^\/(inst_[A-Za-z0-9]+)(?:[/?#]|$)/.exec(url);
  return match?.[1];
}

export const cookieName = (instanceId: string): string => `svc_jupyter_${instanceId}`;

/** The cookie's value: derived from the token, so the cookie alone does not reveal it. */
export function cookieValue(token: string): string {
  return createHmac('sha256', token).update('svc-jupyter-cookie').digest('base64url');
}

export function sameSecret(expected: string, presented: string | undefined): boolean {
  if (presented === undefined || expected === '') return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}

export interface RequestCredentials {
  url: string;
  authorization?: string;
  cookie?: string;
}

export type Authorization = { ok: true; via: 'query' | 'header' | 'cookie' } | { ok: false };

export function authorize(instanceId: string, token: string, request: RequestCredentials): Authorization {
  const query = new URL(request.url, 'http://proxy').searchParams.get('token') ?? undefined;
  if (sameSecret(token, query)) return { ok: true, via: 'query' };
  const header = /^(?:token|bearer)\s+(\S+)$/i.exec(request.authorization ?? '')?.[1];
  if (sameSecret(token, header)) return { ok: true, via: 'header' };
  const expected = cookieValue(token);
  // Any of the values: a page on a sibling port can add a same-named cookie with a longer
  // path (sent first); it must not shadow the real one.
  if (cookieValues(request.cookie ?? '', cookieName(instanceId)).some((v) => sameSecret(expected, v))) return { ok: true, via: 'cookie' };
  return { ok: false };
}

/** Every value a Cookie header carries under `name` (a header may repeat a name). */
export function cookieValues(header: string, name: string): string[] {
  return header
    .split(';')
    .map((part) => parseCookie(part)[name])
    .filter((v): v is string => v !== undefined);
}

export interface RequestContext {
  /** The Origin header, if the browser sent one. */
  origin?: string;
  /** The Host header: the origin the browser is talking to. */
  host?: string;
  /** The Sec-Fetch-Site header (Chromium and Firefox send it to trustworthy origins). */
  secFetchSite?: string;
}

/**
 * Why a request authorized by `via` must be refused as cross-origin, or undefined when it
 * may pass. Only the cookie is ambient: a token in the query or a header was given on
 * purpose, by a client that has it. `ownOrigin` is the instance's public origin.
 */
export function crossOriginRefusal(via: 'query' | 'header' | 'cookie', request: RequestContext, ownOrigin: string): string | undefined {
  if (via !== 'cookie') return undefined;
  if (request.secFetchSite && !['same-origin', 'none'].includes(request.secFetchSite)) {
    return `a ${request.secFetchSite} request cannot use this instance's Jupyter cookie; send the token`;
  }
  if (request.origin === undefined) return undefined;
  if (request.origin === ownOrigin) return undefined;
  // Behind a proxy that keeps the Host header, the browser's own view of the origin.
  const originHost = hostOf(request.origin);
  if (originHost !== undefined && request.host !== undefined && originHost === request.host.toLowerCase()) return undefined;
  return `a request from ${request.origin} cannot use this instance's Jupyter cookie; send the token`;
}

function hostOf(origin: string): string | undefined {
  try {
    return new URL(origin).host.toLowerCase() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Set after a request authorized by `?token=`: scoped to the instance's path, never
 * visible to scripts, never sent with requests another site starts.
 */
export function sessionCookie(instanceId: string, token: string, secure: boolean): string {
  return stringifySetCookie({ name: cookieName(instanceId), value: cookieValue(token), path: `/${instanceId}/`, httpOnly: true, sameSite: 'strict', secure });
}
