// Penalties for sources that make the agent work and then leave, after OpenSSH's
// PerSourcePenalties: every SSH connection costs the agent's one thread a key exchange
// (about 1 ms of CPU, measured) before it knows who is there, and a client can ask for
// that without doing the work itself, so one source could keep the thread that every
// tenant's SSH and Jupyter share busy. Each connection that ends without logging in (on
// the Jupyter ports, each request refused) adds its kind's penalty to its source network
// (an IPv6 client: its /64), which drains in real time. Once a network's penalty exceeds
// `min`, its new connections are closed at once, before any cryptography or parsing,
// until the penalty has drained; it never exceeds `max`. A client that logs in, or fails
// now and then, never accumulates enough to be refused. An IPv6 client's site (its /48)
// adds up its networks' penalties and is refused as a whole past SITE_SHARE times `min`,
// draining SITE_SHARE times as fast.
import { BlockList, isIP } from 'node:net';
import { clientNetwork, clientSite, SITE_SHARE } from '@svc/shared';

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
  /** Milliseconds of penalty left as of `at`. */
  level: number;
  at: number;
  /** Exceeded the threshold at some point: refused until it drains. */
  active: boolean;
}

/** A refusal: how many more milliseconds it lasts, and whether it is the whole site's. */
export interface Refusal {
  ms: number;
  /** The source's site (an IPv6 /48) is refused, not only its network. */
  site: boolean;
}

interface BookLimits {
  /** Refused once its penalty exceeds this. */
  minMs: number;
  /** Penalties accumulate up to this. */
  maxMs: number;
  maxSources: number;
  /** Milliseconds of penalty that drain each millisecond. */
  drainRate: number;
}

/** Penalties by key, each refused once past `minMs` until it has drained. */
class PenaltyBook {
  /** Oldest first (Map order), so overflow forgets the oldest. */
  private readonly penalties = new Map<string, Penalty>();

  constructor(
    private readonly limits: BookLimits,
    private readonly now: () => number,
  ) {}

  get size(): number {
    return this.penalties.size;
  }

  refusedFor(key: string): number {
    const penalty = this.current(key);
    return penalty?.active ? Math.ceil(penalty.level / this.limits.drainRate) : 0;
  }

  /** Adds `ms`; when this starts the key's refusal, the ms it lasts, else 0. */
  add(key: string, ms: number): number {
    let penalty = this.current(key);
    if (!penalty) {
      if (this.penalties.size >= this.limits.maxSources) this.penalties.delete(this.penalties.keys().next().value!);
      penalty = { level: 0, at: this.now(), active: false };
      this.penalties.set(key, penalty);
    }
    penalty.level = Math.min(penalty.level + ms, this.limits.maxMs);
    if (penalty.active || penalty.level <= this.limits.minMs) return 0;
    penalty.active = true;
    return Math.ceil(penalty.level / this.limits.drainRate);
  }

  /** The key's penalty drained to now; a drained one is forgotten. */
  private current(key: string): Penalty | undefined {
    const penalty = this.penalties.get(key);
    if (!penalty) return undefined;
    const now = this.now();
    penalty.level -= (now - penalty.at) * this.limits.drainRate;
    penalty.at = now;
    if (penalty.level > 0) return penalty;
    this.penalties.delete(key);
    return undefined;
  }
}

export class SourcePenalties<Kind extends string> {
  private readonly networks: PenaltyBook;
  /**
   * IPv6 sites (/48s), each the sum of its networks' penalties, with SITE_SHARE clients'
   * allowance: refused past SITE_SHARE times `min`, draining SITE_SHARE times as fast. A
   * party with a /48 has 65,536 /64s and would otherwise be refused network by network,
   * never as a whole; a site is refused only when its networks together fail faster than
   * SITE_SHARE clients could go on failing unrefused, so a scanner or two among a hosting
   * provider's customers who share a /48 shut out nobody. An IPv4 source's site is itself.
   */
  private readonly sites: PenaltyBook;
  private readonly exempt = new BlockList();

  constructor(
    private readonly policy: PenaltyPolicy<Kind>,
    now: () => number = Date.now,
  ) {
    for (const cidr of policy.exempt) {
      const { address, prefix, family } = parseCidr(cidr);
      this.exempt.addSubnet(address, prefix, family);
    }
    this.networks = new PenaltyBook({ ...policy, drainRate: 1 }, now);
    this.sites = new PenaltyBook({ minMs: policy.minMs * SITE_SHARE, maxMs: policy.maxMs * SITE_SHARE, maxSources: policy.maxSources, drainRate: SITE_SHARE }, now);
  }

  /** Networks with a penalty (drained ones included until next looked at). */
  get size(): number {
    return this.networks.size;
  }

  /** How long connections from `address` are still refused, and why; null: admitted. */
  refusedFor(address: string): Refusal | null {
    const site = siteOf(address);
    const siteMs = site === undefined ? 0 : this.sites.refusedFor(site);
    if (siteMs > 0) return { ms: siteMs, site: true };
    const ms = this.networks.refusedFor(clientNetwork(address));
    return ms > 0 ? { ms, site: false } : null;
  }

  /** A connection from `address` ended as `kind`; the refusal this starts (the site's first), or null. */
  penalize(address: string, kind: Kind): Refusal | null {
    const ms = this.policy.durations[kind];
    if (ms <= 0 || this.isExempt(address)) return null;
    const network = this.networks.add(clientNetwork(address), ms);
    const site = siteOf(address);
    const siteMs = site === undefined ? 0 : this.sites.add(site, ms);
    if (siteMs > 0) return { ms: siteMs, site: true };
    return network > 0 ? { ms: network, site: false } : null;
  }

  private isExempt(address: string): boolean {
    const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    if (v4 !== undefined) return this.exempt.check(v4, 'ipv4');
    const family = isIP(address);
    return family !== 0 && this.exempt.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

/** Whose penalty a refusal is, for the log: the source's own or its whole site's. */
export function penaltyHolder(refusal: Refusal): string {
  return refusal.site ? 'its site (an IPv6 /48)' : 'source';
}

/** An IPv6 source's site (its /48); undefined for IPv4, whose site is its network. */
function siteOf(address: string): string | undefined {
  const site = clientSite(address);
  return site.endsWith('/48') ? site : undefined;
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
