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

/**
 * SVC_CONTROL_PLANE as a list of targets: one address, or several separated by commas
 * (control-plane replicas the agent fails over between, in order). Blanks around commas
 * are ignored; an empty entry or one without a port is an error naming it.
 */
export function parseControlPlaneTargets(value: string): string[] {
  const targets = value.split(',').map((s) => s.trim());
  for (const target of targets) {
    if (target === '') throw new Error(`SVC_CONTROL_PLANE "${value}" has an empty address; separate host:port addresses with single commas`);
    if (!/:\d{1,5}$/.test(target)) throw new Error(`SVC_CONTROL_PLANE address "${target}" has no port; write host:port (e.g. cp1.example.com:7070)`);
  }
  return targets;
}

/** The port of a gRPC target ("host:port", "[v6]:port", "dns:///host:port"); NaN without one. */
export function targetPort(target: string): number {
  const match = /:(\d{1,5})$/.exec(target);
  return match ? Number(match[1]) : Number.NaN;
}
