// The kernel's list of penalized sources, through the real xt_recent files: the host
// firewall's rule makes the kernel create them, and what the agent writes is what the
// kernel then holds.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PENALIZED_LISTS } from '../runtime/firewall-rules.js';
import { entryOf, KernelDropList, listOf } from './kernel-drop.js';

describe('entryOf and listOf', () => {
  it.each([
    ['203.0.113.9', '203.0.113.9', PENALIZED_LISTS.ipv4],
    ['::ffff:203.0.113.9', '203.0.113.9', PENALIZED_LISTS.ipv4],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::', PENALIZED_LISTS.ipv6],
    ['127.0.0.2', '127.0.0.2', undefined],
    ['::1', '::', undefined],
    ['not an address', 'not an address', undefined],
  ])('%s', (address, entry, list) => {
    expect(entryOf(address)).toBe(entry);
    expect(listOf(entryOf(address))).toBe(list);
  });

  it.each([
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1::', PENALIZED_LISTS.ipv6Site],
    ['203.0.113.9', '203.0.113.9', PENALIZED_LISTS.ipv4],
  ])('the site of %s', (address, entry, list) => {
    expect(entryOf(address, true)).toBe(entry);
    expect(listOf(entryOf(address, true), true)).toBe(list);
  });
});

// A chain of the test's own whose rules name the lists, so the kernel makes their files.
const CHAIN = 'SVC-TEST-KERNEL-DROP';
const rule = (tool: string, list: string) => execFileSync(tool, ['-w', '-A', CHAIN, '-m', 'recent', '--name', list, '--rcheck', '--seconds', '600', '-j', 'RETURN']);
const contents = (list: string) => readFileSync(`/proc/net/xt_recent/${list}`, 'utf8');

beforeAll(() => {
  for (const [tool, lists] of [['iptables', [PENALIZED_LISTS.ipv4]], ['ip6tables', [PENALIZED_LISTS.ipv6, PENALIZED_LISTS.ipv6Site]]] as const) {
    execFileSync(tool, ['-w', '-N', CHAIN]);
    for (const list of lists) rule(tool, list);
  }
});

afterAll(() => {
  for (const tool of ['iptables', 'ip6tables']) {
    execFileSync(tool, ['-w', '-F', CHAIN]);
    execFileSync(tool, ['-w', '-X', CHAIN]);
  }
});

describe('KernelDropList', () => {
  it('puts a source in the kernel list for its penalty and takes it out after', async () => {
    const errors: Error[] = [];
    const list = new KernelDropList({ onError: (err) => errors.push(err) });
    list.drop('198.51.100.77', { ms: 300, site: false });
    list.drop('2001:db8:77:1::9', { ms: 300, site: false });
    await vi.waitFor(() => {
      expect(contents(PENALIZED_LISTS.ipv4)).toContain('src=198.51.100.77 ');
      expect(contents(PENALIZED_LISTS.ipv6)).toContain('src=2001:0db8:0077:0001:0000:0000:0000:0000 ');
    });
    expect(list.size).toBe(2);
    await vi.waitFor(() => {
      expect(contents(PENALIZED_LISTS.ipv4)).not.toContain('198.51.100.77');
      expect(contents(PENALIZED_LISTS.ipv6)).not.toContain('2001:0db8:0077:0001');
    }, { timeout: 2_000 });
    expect(list.size).toBe(0);
    expect(errors).toEqual([]);
  });

  it("drops an IPv6 site as a whole in the site list, apart from its networks' entries", async () => {
    const list = new KernelDropList({ onError: (err) => expect.fail(err.message) });
    list.drop('2001:db8:79:1::9', { ms: 60_000, site: false });
    list.drop('2001:db8:79:2::9', { ms: 60_000, site: true });
    await vi.waitFor(() => {
      expect(contents(PENALIZED_LISTS.ipv6)).toContain('src=2001:0db8:0079:0001:0000:0000:0000:0000 ');
      expect(contents(PENALIZED_LISTS.ipv6Site)).toContain('src=2001:0db8:0079:0000:0000:0000:0000:0000 ');
    });
    expect(list.size).toBe(2);
    // Kept while its entry stands, from any network of the site.
    list.keep('2001:db8:79:ffff::1', { ms: 100, site: true });
    expect(list.size).toBe(2);
    await list.close();
    expect(contents(PENALIZED_LISTS.ipv6)).not.toContain('2001:0db8:0079');
    expect(contents(PENALIZED_LISTS.ipv6Site)).not.toContain('2001:0db8:0079');
  });

  it('hands a source to the kernel again when the agent still refuses it after its entry ended', async () => {
    const list = new KernelDropList({ onError: () => undefined });
    list.drop('198.51.100.80', { ms: 100, site: false });
    // The agent forgets the entry at once and writes the kernel's file after: wait for both.
    await vi.waitFor(() => {
      expect(list.size).toBe(0);
      expect(contents(PENALIZED_LISTS.ipv4)).not.toContain('198.51.100.80');
    }, { timeout: 2_000 });
    list.keep('198.51.100.80', { ms: 60_000, site: false });
    await vi.waitFor(() => expect(contents(PENALIZED_LISTS.ipv4)).toContain('src=198.51.100.80 '));
    // Kept while its entry stands: its own time holds (a drop would have ended it in 100 ms).
    list.keep('198.51.100.80', { ms: 100, site: false });
    await new Promise((r) => setTimeout(r, 300));
    expect(list.size).toBe(1);
    expect(contents(PENALIZED_LISTS.ipv4)).toContain('src=198.51.100.80 ');
    await list.close();
  });

  it('leaves loopback to the agent, and takes everything out when closed', async () => {
    const list = new KernelDropList({ onError: () => undefined });
    list.drop('127.0.0.9', { ms: 60_000, site: false });
    list.drop('198.51.100.78', { ms: 60_000, site: false });
    expect(list.size).toBe(1);
    await vi.waitFor(() => expect(contents(PENALIZED_LISTS.ipv4)).toContain('src=198.51.100.78 '));
    expect(contents(PENALIZED_LISTS.ipv4)).not.toContain('127.0.0.9');
    await list.close();
    expect(contents(PENALIZED_LISTS.ipv4)).not.toContain('198.51.100.78');
  });

  it('says when the kernel has no such list (no host firewall): the agent goes on refusing by itself', async () => {
    const errors: Error[] = [];
    const list = new KernelDropList({ procDir: '/nonexistent', onError: (err) => errors.push(err) });
    list.drop('198.51.100.79', { ms: 60_000, site: false });
    await vi.waitFor(() => expect(errors.map((e) => (e as NodeJS.ErrnoException).code)).toEqual(['ENOENT']));
    await list.close();
  });
});
