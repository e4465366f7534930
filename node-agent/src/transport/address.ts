// What the agent dials: a "host:port" (or "[v6]:port") target, and whether it is on
// loopback, the only place plaintext gRPC is allowed.
import { isIP } from 'node:net';

/** The host part of a gRPC target; accepts "host:port", "[::1]:port", "dns:///host:port". */
export function targetHost(target: string): string {
  const withoutScheme = target.replace(/^[a-z]+:\/\/\/?/i, '');
  const bracketed = /^\[([^\]]+)\]/.exec(withoutScheme);
  if (bracketed) return bracketed[1]!;
  const colons = withoutScheme.split(':').length - 1;
  // A bare IPv6 address has several colons and no port.
  if (colons > 1) return withoutScheme;
  return withoutScheme.split(':')[0]!;
}

export function isLoopbackTarget(target: string): boolean {
  const host = targetHost(target).toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1' || host === '0:0:0:0:0:0:0:1';
  return false;
}
