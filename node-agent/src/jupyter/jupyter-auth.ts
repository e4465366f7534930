// Who may use an instance's Jupyter endpoint: requests carrying the instance's token, as
// Jupyter itself accepts it (`?token=`, `Authorization: token ...`), or the cookie the
// proxy sets once a browser came with the token (Jupyter's own pages make requests that
// carry cookies, not the token). Pure functions over the request's URL and headers.
import { createHmac, timingSafeEqual } from 'node:crypto';

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
  if (sameSecret(cookieValue(token), cookiesOf(request.cookie ?? '').get(cookieName(instanceId)))) return { ok: true, via: 'cookie' };
  return { ok: false };
}

export function cookiesOf(header: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) out.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return out;
}

/** Set after a request authorized by `?token=`: scoped to the instance's path, never sent to scripts. */
export function sessionCookie(instanceId: string, token: string, secure: boolean): string {
  return `${cookieName(instanceId)}=${cookieValue(token)}; Path=/${instanceId}/; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}
