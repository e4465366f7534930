// Step 1: every request gets an id, echoed as `x-request-id` and written in every log line.
// A well-formed id sent by the client (or a load balancer) is kept so traces join up.
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { randomUUID } from 'node:crypto';

const CLIENT_ID = /^[A-Za-z0-9._:-]{8,128}$/;

export function genReqId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  // randomUUID draws from a cached entropy pool: far cheaper per request than newId().
  return typeof incoming === 'string' && CLIENT_ID.test(incoming) ? incoming : `req_${randomUUID().replaceAll('-', '')}`;
}

/** A callback hook, not an async one: no promise and microtask on every request. */
export function echoRequestId(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  reply.header('x-request-id', request.id);
  done();
}
