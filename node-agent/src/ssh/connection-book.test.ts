import { describe, expect, it } from 'vitest';
import { ConnectionBook, type ConnectionTicket } from './connection-book.js';

const caps = { maxPendingHandshakes: 3, maxConnectionsPerSource: 4, maxConnectionsPerInstance: 2 };
const ticket = (book: ConnectionBook, source: string): ConnectionTicket => {
  const a = book.open(source);
  if (!a.ok) throw new Error(a.reason);
  return a.ticket;
};

describe('SSH connection bookkeeping', () => {
  it('refuses a handshake past the node-wide cap, and takes one again when one logs in or leaves', () => {
    const book = new ConnectionBook(caps);
    const t = [ticket(book, '10.0.0.1'), ticket(book, '10.0.0.2'), ticket(book, '10.0.0.3')];
    const refused = book.open('10.0.0.4');
    expect(refused).toMatchObject({ ok: false, reason: expect.stringMatching(/SVC_SSH_MAX_PENDING_HANDSHAKES/) });
    expect(t[0]!.authenticated('inst_a')).toBe(true);
    expect(book.pendingHandshakes).toBe(2);
    expect(book.open('10.0.0.4').ok).toBe(true);
    t[1]!.close();
    t[1]!.close(); // twice is once
    expect(book.pendingHandshakes).toBe(2);
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
