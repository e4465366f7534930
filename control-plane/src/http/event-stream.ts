// Answers with a Server-Sent Events stream, ended when its client stops taking it. The relay
// passes the client's pace back to the replica (it reads the replica no faster than the
// client reads it), and an engine that waits on its reader (the CPU engine) then holds a
// generation slot for as long as a client that stopped reading keeps its connection open:
// a few such streams took every slot of a replica from every other tenant. So a stream whose
// bytes have waited for the client longer than `stallMs` is ended as a departed client's is:
// the replica's work is cancelled and what it generated billed (client-departure.ts).
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';

export function sendEventStream(reply: FastifyReply, frames: Iterable<string> | AsyncIterable<string>, stallMs: number): FastifyReply {
  reply.header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache').header('x-accel-buffering', 'no');
  const res = reply.raw;
  // Since when bytes have waited for the client (the socket took none of the last write).
  let waitingSince: number | null = null;
  const watch = setInterval(() => {
    if (!res.writableNeedDrain) return void (waitingSince = null);
    waitingSince ??= Date.now();
    if (Date.now() - waitingSince >= stallMs) res.destroy();
  }, Math.max(50, Math.floor(stallMs / 4)));
  watch.unref();
  res.on('drain', () => (waitingSince = null));
  res.once('close', () => clearInterval(watch));
  return reply.send(Readable.from(frames, { objectMode: false }));
}
