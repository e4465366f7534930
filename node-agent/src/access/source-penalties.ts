// Penalties for sources that make the agent work and then leave, after OpenSSH's
// PerSourcePenalties: every SSH connection costs the agent's one thread a key exchange
// (about 1 ms of CPU, measured) before it knows who is there, and a client can ask for
// that without doing the work itself, so one source could keep the thread that every
// tenant's SSH and Jupyter share busy. Each connection that ends without logging in (on
// the Jupyter ports, each request refused) adds its kind's penalty to its source network
// (an IPv6 client: its /64), which drains in real time. Once a network's penalty exceeds
// `min`, its new connections are closed at once, before any cryptography or parsing,
// until the penalty has drained; it never exceeds `max`. A client that logs in, or fails
// now and then, never accumulates enough to be refused.
import { BlockList, isIP } from 'node:net';
import { clientNetwork } from '@svc/shared';

export interface PenaltyPolicy<Kind extends string> {
  /** Milliseconds of penalty each kind of ending adds. */
  durations: Record<Kind, number>;
  /** A network is refused only while its penalty exceeds this. */
  minMs: number;
  /** Penalties accumulate up to this. */
  maxMs: number;
  /** Networks remembered at most; past it the oldest is forgotten (OpenSSH: permissive). */
  maxSources: number;
  /** Addresses and CIDRs never penalized (monitoring, a bastion, the provider's own). */
  exempt: readonly string[];
}

interface Penalty {
  expiresAt: number;
  /** Exceeded `min` at some point: refused until it expires. */
  active: boolean;
}

export class SourcePenalties<Kind extends string> {
  /** By source network, oldest first (Map order), so overflow forgets the oldest. */
  private readonly penalties = new Map<string, Penalty>();
  private readonly exempt = new BlockList();

  constructor(
    private readonly policy: PenaltyPolicy<Kind>,
    private readonly now: () => number = Date.now,
  ) {
    for (const cidr of policy.exempt) {
      const { address, prefix, family } = parseCidr(cidr);
      this.exempt.addSubnet(address, prefix, family);
    }
  }

  /** Networks with a penalty (drained ones included until next looked at). */
  get size(): number {
    return this.penalties.size;
  }

  /** How many more milliseconds connections from `address` are refused; 0: admitted. */
  refusedFor(address: string): number {
    const network = clientNetwork(address);
    const penalty = this.penalties.get(network);
    if (!penalty) return 0;
    const left = penalty.expiresAt - this.now();
    if (left <= 0) {
      this.penalties.delete(network);
      return 0;
    }
    return penalty.active ? left : 0;
  }

  /** A connection from `address` ended as `kind`; when this starts its refusal, the ms it lasts, else 0. */
  penalize(address: string, kind: Kind): number {
    const ms = this.policy.durations[kind];
    if (ms <= 0 || this.isExempt(address)) return 0;
    const network = clientNetwork(address);
    const now = this.now();
    let penalty = this.penalties.get(network);
    if (penalty && penalty.expiresAt <= now) {
      this.penalties.delete(network);
      penalty = undefined;
    }
    if (penalty) {
      penalty.expiresAt = Math.min(penalty.expiresAt + ms, now + this.policy.maxMs);
    } else {
      if (this.penalties.size >= this.policy.maxSources) this.penalties.delete(this.penalties.keys().next().value!);
      penalty = { expiresAt: now + Math.min(ms, this.policy.maxMs), active: false };
      this.penalties.set(network, penalty);
    }
    if (penalty.active || penalty.expiresAt - now <= this.policy.minMs) return 0;
    penalty.active = true;
    return penalty.expiresAt - now;
  }

  private isExempt(address: string): boolean {
    const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    if (v4 !== undefined) return this.exempt.check(v4, 'ipv4');
    const family = isIP(address);
    return family !== 0 && this.exempt.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

/** `a.b.c.d/n`, `x:y::/n` or a bare address; throws with what is wrong. */
export function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } {
  const [address = '', prefixText, extra] = text.split('/');
  const version = isIP(address);
  if (version === 0 || extra !== undefined) throw new Error(`"${text}" is not an IP address or CIDR (a.b.c.d/n or x:y::/n)`);
  const bits = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText ?? String(bits)) || prefix > bits) throw new Error(`"${text}" has a prefix length outside 0-${bits}`);
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** `1s`, `500ms`, `10m`, `1h30m`, or bare seconds (OpenSSH's time format, plus `ms`). */
export function parsePenaltyDuration(text: string): number {
  if (/^\d+$/.test(text)) return Number(text) * 1_000;
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw new Error(`"${text}" is not a duration (like 500ms, 5s, 10m, 1h)`);
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * UNIT_MS[unit!]!, 0);
}

/**
 * A policy from `kind:duration` words over `defaults` (OpenSSH's PerSourcePenalties
 * syntax: `noauth:1s authfail:5s min:15s max:10m max-sources:65536`); `off`: none.
 */
export function parsePenaltyPolicy<Kind extends string>(text: string, defaults: Omit<PenaltyPolicy<Kind>, 'exempt'>, exempt: readonly string[]): PenaltyPolicy<Kind> | null {
  if (text.trim() === 'off') return null;
  const policy = { ...defaults, durations: { ...defaults.durations }, exempt };
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const [name = '', value, extra] = word.split(':');
    if (value === undefined || extra !== undefined) throw new Error(`"${word}" is not name:value`);
    if (name === 'max-sources') {
      if (!/^[1-9]\d{0,6}$/.test(value)) throw new Error(`max-sources "${value}" is not a count from 1 to 9999999`);
      policy.maxSources = Number(value);
    } else if (name === 'min') policy.minMs = parsePenaltyDuration(value);
    else if (name === 'max') policy.maxMs = parsePenaltyDuration(value);
    else if (Object.hasOwn(policy.durations, name)) policy.durations[name as Kind] = parsePenaltyDuration(value);
    else throw new Error(`unknown penalty "${name}" (known: ${[...Object.keys(defaults.durations), 'min', 'max', 'max-sources'].join(', ')})`);
  }
  return policy;
}
