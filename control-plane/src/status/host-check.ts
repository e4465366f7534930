// Which Host headers the operators' listener serves its pages to. The listener has no
// authentication (it belongs on loopback or a management network), so a web page an
// operator visits could point its own domain at 127.0.0.1 (DNS rebinding) and read the
// fleet from the operator's browser. Such a request carries the attacker's domain in
// Host: only IP literals, localhost and names the operator lists are served.
import { isIP } from 'node:net';

/** The host part of a Host header value, lower-cased, without port or IPv6 brackets; undefined if malformed. */
export function hostOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^(?:\[([0-9a-f:.]+)\]|([^:\[\]]+))(?::\d{1,5})?$/i.exec(header.trim());
  if (!m) return undefined;
  return (m[1] ?? m[2]!).toLowerCase().replace(/\.$/, '');
}

export function hostAllowed(header: string | undefined, allowedNames: readonly string[]): boolean {
  const host = hostOf(header);
  if (host === undefined) return false;
  if (isIP(host) !== 0 || host === 'localhost') return true;
  return allowedNames.some((n) => n.toLowerCase().replace(/\.$/, '') === host);
}
