// Penalized sources dropped by the kernel, so a source shut out by the penalties
// (source-penalties.ts) costs the agent nothing at all: refused in Node, each of its
// connections is still accepted and closed on the agent's one thread (measured: 16-23 us,
// half a core for two flooding processes). The host firewall's INPUT chain drops new TCP
// connections from sources in an xt_recent list (runtime/firewall-rules.ts); this adds a
// source to it for as long as its penalty lasts (at most PENALIZED_MAX_SECONDS, after
// which the kernel lets it through and the agent refuses it itself) and takes it out
// when that ends. Loopback sources are left to the agent: they are the host's own. An
// IPv6 site refused as a whole (a /48) has an entry in a list of its own, whose rule
// compares /48s.
import { appendFile } from 'node:fs/promises';
import { isIPv4, isIPv6 } from 'node:net';
import { join } from 'node:path';
import { clientNetwork, clientSite } from '@svc/shared';
import type { Refusal } from './source-penalties.js';
import { PENALIZED_LISTS, PENALIZED_MAX_SECONDS } from '../runtime/firewall-rules.js';

export interface KernelDropOptions {
  /** Where the kernel shows its xt_recent lists. */
  procDir?: string;
  /** A write failed (no firewall, no xt_recent): the agent goes on refusing in Node. */
  onError: (err: Error) => void;
}

export class KernelDropList {
  private readonly procDir: string;
  /** `list|entry` (an IPv4 address, an IPv6 /64 or /48 written as its first address) -> when it is taken out. */
  private readonly entries = new Map<string, NodeJS.Timeout>();

  constructor(private readonly options: KernelDropOptions) {
    this.procDir = options.procDir ?? '/proc/net/xt_recent';
  }

  /** Drops what `refusal` refuses of `address` (its network, or its IPv6 site) for `refusal.ms`. */
  drop(address: string, refusal: Refusal): void {
    const target = targetOf(address, refusal.site);
    if (!target) return;
    const key = `${target.list}|${target.entry}`;
    clearTimeout(this.entries.get(key));
    const forMs = Math.min(refusal.ms, PENALIZED_MAX_SECONDS * 1000);
    const timer = setTimeout(() => {
      this.entries.delete(key);
      void this.write(target.list, `-${target.entry}`);
    }, forMs);
    timer.unref();
    this.entries.set(key, timer);
    void this.write(target.list, `+${target.entry}`);
  }

  /**
   * A source the agent is refusing for `refusal.ms` more: handed to the kernel again if its
   * entry ended before its penalty did (connections open at the time closed later, adding to it).
   */
  keep(address: string, refusal: Refusal): void {
    const target = targetOf(address, refusal.site);
    if (target && !this.entries.has(`${target.list}|${target.entry}`)) this.drop(address, refusal);
  }

  /** Entries in the kernel's lists now (for tests and the log). */
  get size(): number {
    return this.entries.size;
  }

  /** Takes every entry out (the agent stops: nobody would take them out later). */
  async close(): Promise<void> {
    const keys = [...this.entries.keys()];
    for (const timer of this.entries.values()) clearTimeout(timer);
    this.entries.clear();
    await Promise.all(
      keys.map((key) => {
        const [list = '', entry = ''] = key.split('|');
        return this.write(list, `-${entry}`);
      }),
    );
  }

  private async write(list: string, line: string): Promise<void> {
    try {
      await appendFile(join(this.procDir, list), `${line}\n`);
    } catch (err) {
      // Taking out an entry the kernel already aged out is not worth a word.
      if (!line.startsWith('-')) this.options.onError(err as Error);
    }
  }
}

/** The kernel's entry for a source: its IPv4 address, or its IPv6 /64 (its /48 for a site) as that prefix's first address. */
export function entryOf(address: string, site = false): string {
  return (site ? clientSite(address) : clientNetwork(address)).replace(/\/(64|48)$/, '');
}

/** The kernel's list for an entry; undefined for loopback (never dropped) and anything unparsable. */
export function listOf(entry: string, site = false): string | undefined {
  if (isIPv4(entry)) return entry.startsWith('127.') ? undefined : PENALIZED_LISTS.ipv4;
  if (isIPv6(entry)) return entry === '::1' || entry === '::' ? undefined : site ? PENALIZED_LISTS.ipv6Site : PENALIZED_LISTS.ipv6;
  return undefined;
}

/** Where a refusal of `address` goes in the kernel; an IPv4 source's site is its address. */
function targetOf(address: string, site: boolean): { list: string; entry: string } | undefined {
  const siteWide = site && isIPv6(entryOf(address, true));
  const entry = entryOf(address, siteWide);
  const list = listOf(entry, siteWide);
  return list === undefined ? undefined : { list, entry };
}
