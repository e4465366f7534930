import { describe, expect, it } from 'vitest';
import { ConnectionBook, type ConnectionTicket } from './connection-book.js';

const caps = { maxPendingHandshakes: 3, maxConnectionsPerSource: 4, maxConnectionsPerInstance: 2 };
const ticket = (book: ConnectionBook, source: string): ConnectionTicket => {
  const a = book.open(source);
  if (!a.ok) throw new Error(a.reason);
  return a.ticket;
};

describe('SSH connection bookkeeping', () => {
  it('refuses a handshake past the node-wide cap when no client holds more than the newcomer, and takes one again when one logs in or leaves', () => {
    const book = new ConnectionBook(caps);
    const t = [ticket(book, '10.0.0.1'), ticket(book, '10.0.0.1'), ticket(book, '10.0.0.1')];
    const refused = book.open('10.0.0.1');
    expect(refused).toMatchObject({ ok: false, reason: '3 connections are still logging in (SVC_SSH_MAX_PENDING_HANDSHAKES), 3 of them from 10.0.0.1, no more from any other' });
    expect(t[0]!.authenticated('inst_a')).toBe(true);
    expect(book.pendingHandshakes).toBe(2);
    expect(book.open('10.0.0.1').ok).toBe(true);
    t[1]!.close();
    t[1]!.close(); // twice is once
    expect(book.pendingHandshakes).toBe(2);
  });

  it('gives a full table\'s slot to a newcomer: the oldest handshake of the client holding the most is dropped, never one of its own', () => {
    const book = new ConnectionBook({ ...caps, maxPendingHandshakes: 4, maxConnectionsPerSource: 10 });
    const drops: string[] = [];
    const open = (address: string, name: string) => {
      const a = book.open(address, () => drops.push(name));
      if (!a.ok) throw new Error(a.reason);
      return a.ticket;
    };
    const hog = [open('203.0.113.66', 'hog1'), open('203.0.113.66', 'hog2'), open('203.0.113.66', 'hog3')];
    open('198.51.100.1', 'alice');
    // The hog cannot take a slot from itself, nor from alice, who holds fewer.
    expect(book.open('203.0.113.66', () => drops.push('hog4'))).toMatchObject({ ok: false });
    open('198.51.100.2', 'bob'); // bob holds none, the hog three: its oldest goes
    expect(drops).toEqual(['hog1']);
    expect(book.pendingHandshakes).toBe(4);
    hog[0]!.close(); // the gateway closes the dropped socket: counted once
    expect(book.pendingHandshakes).toBe(4);
    open('198.51.100.3', 'carol');
    expect(drops).toEqual(['hog1', 'hog2']);
    // hog, alice, bob and carol hold one each: a newcomer holding none takes the oldest.
    expect(hog[2]!.authenticated('inst_a')).toBe(true); // logged in: no longer a handshake to drop
    open('198.51.100.5', 'erin');
    open('198.51.100.4', 'dave');
    expect(drops).toEqual(['hog1', 'hog2', 'alice']);
    // Now everyone holds one, dave too: his second waits for a slot.
    expect(book.open('198.51.100.4')).toMatchObject({ ok: false });
    expect(book.pendingHandshakes).toBe(4);
  });

  it('counts an IPv6 party by its /48 for the handshake slots, so a fresh /64 per connection takes no slot from others', () => {
    const book = new ConnectionBook({ ...caps, maxPendingHandshakes: 4, maxConnectionsPerSource: 1 });
    const drops: string[] = [];
    for (let i = 1; i <= 4; i++) expect(book.open(`2001:db8:66:${i}::1`, () => drops.push(`/64 #${i}`)).ok).toBe(true);
    expect(book.open('2001:db8:66:5::1')).toMatchObject({ ok: false, reason: expect.stringContaining('4 of them from 2001:db8:66::/48') });
    expect(book.open('2001:db8:99:1::1').ok).toBe(true); // another site: the party's oldest goes
    expect(drops).toEqual(['/64 #1']);
    // The per-source cap still counts the /64.
    expect(book.open('2001:db8:99:1::2')).toMatchObject({ ok: false, reason: expect.stringMatching(/^2001:db8:99:1::\/64 holds 1 connections/) });
  });

  it('caps connections per source address, logged in or not', () => {
    const book = new ConnectionBook({ ...caps, maxPendingHandshakes: 100 });
    const held = Array.from({ length: 4 }, () => ticket(book, '203.0.113.9'));
    held[0]!.authenticated('inst_a');
    expect(book.open('203.0.113.9')).toMatchObject({ ok: false, reason: expect.stringMatching(/SVC_SSH_MAX_CONNECTIONS_PER_SOURCE/) });
    expect(book.open('198.51.100.1').ok).toBe(true);
    held[0]!.close();
    expect(book.open('203.0.113.9').ok).toBe(true);
  });

  it('caps logged-in connections per instance; a refused login stays pending until it leaves', () => {
    const book = new ConnectionBook({ ...caps, maxPendingHandshakes: 100, maxConnectionsPerSource: 100 });
    const [a, b, c] = [ticket(book, 's'), ticket(book, 's'), ticket(book, 's')];
    expect(a.authenticated('inst_a')).toBe(true);
    expect(b.authenticated('inst_a')).toBe(true);
    expect(c.authenticated('inst_a')).toBe(false);
    expect(c.authenticated('inst_b')).toBe(true); // another instance has room
    expect(book.connectionsOf('inst_a')).toBe(2);
    a.close();
    expect(book.connectionsOf('inst_a')).toBe(1);
    expect(ticket(book, 's').authenticated('inst_a')).toBe(true);
    expect(book.pendingHandshakes).toBe(0);
  });
});
