// Penalized sources dropped by the kernel, so a source shut out by the penalties
// (source-penalties.ts) costs the agent nothing at all: refused in Node, each of its
// connections is still accepted and closed on the agent's one thread (measured: 16-23 us,
// half a core for two flooding processes). The host firewall's INPUT chain drops new TCP
// connections from sources in an xt_recent list (runtime/firewall-rules.ts); this adds a
// source to it for as long as its penalty lasts (at most PENALIZED_MAX_SECONDS, after
// which the kernel lets it through and the agent refuses it itself) and takes it out
// when that ends. Loopback sources are left to the agent: they are the host's own.
import { appendFile } from 'node:fs/promises';
import { isIPv4, isIPv6 } from 'node:net';
import { join } from 'node:path';
import { clientNetwork } from '@svc/shared';
import { PENALIZED_LISTS, PENALIZED_MAX_SECONDS } from '../runtime/firewall-rules.js';

export interface KernelDropOptions {
  /** Where the kernel shows its xt_recent lists. */
  procDir?: string;
  /** A write failed (no firewall, no xt_recent): the agent goes on refusing in Node. */
  onError: (err: Error) => void;
}

export class KernelDropList {
  private readonly procDir: string;
  /** Kernel entry (an IPv4 address, an IPv6 /64 written as its first address) -> when it is taken out. */
  private readonly entries = new Map<string, NodeJS.Timeout>();

  constructor(private readonly options: KernelDropOptions) {
    this.procDir = options.procDir ?? '/proc/net/xt_recent';
  }

  /** Drops the network of `address` (as penalties count sources: an IPv6 client's /64) for `ms`. */
  drop(address: string, ms: number): void {
    const network = entryOf(address);
    const list = listOf(network);
    if (!list) return;
    clearTimeout(this.entries.get(network));
    const forMs = Math.min(ms, PENALIZED_MAX_SECONDS * 1000);
    const timer = setTimeout(() => {
      this.entries.delete(network);
      void this.write(list, `-${network}`);
    }, forMs);
    timer.unref();
    this.entries.set(network, timer);
    void this.write(list, `+${network}`);
  }

  /**
   * A source the agent is refusing for `ms` more: handed to the kernel again if its entry
   * ended before its penalty did (connections open at the time closed later, adding to it).
   */
  keep(address: string, ms: number): void {
    if (!this.entries.has(entryOf(address))) this.drop(address, ms);
  }

  /** Sources dropped now (for tests and the log). */
  get size(): number {
    return this.entries.size;
  }

  /** Takes every entry out (the agent stops: nobody would take them out later). */
  async close(): Promise<void> {
    const networks = [...this.entries.keys()];
    for (const timer of this.entries.values()) clearTimeout(timer);
    this.entries.clear();
    await Promise.all(networks.map((network) => this.write(listOf(network)!, `-${network}`)));
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

/** The kernel's entry for a source: its IPv4 address, or its IPv6 /64 as that prefix's first address. */
export function entryOf(address: string): string {
  return clientNetwork(address).replace(/\/64$/, '');
}

/** The kernel's list for an entry; undefined for loopback (never dropped) and anything unparsable. */
export function listOf(network: string): string | undefined {
  if (isIPv4(network)) return network.startsWith('127.') ? undefined : PENALIZED_LISTS.ipv4;
  if (isIPv6(network)) return network === '::1' || network === '::' ? undefined : PENALIZED_LISTS.ipv6;
  return undefined;
}
