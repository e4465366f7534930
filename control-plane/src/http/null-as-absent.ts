// OpenAI's request bodies take `null` for every optional field (`temperature: null`,
// `stop: null`, `store: null`: the SDKs' types say `?: T | null`), meaning "not given".
// Clients that write out every field (other languages' SDKs, hand-written ones) send them
// so; the schemas here say `?: T`, and such a body was refused field by field. For the
// OpenAI-compatible routes, a top-level null is taken as the field left out, before the
// body is validated.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

export function nullAsAbsent(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const body = request.body;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const fields = body as Record<string, unknown>;
    for (const key in fields) if (fields[key] === null) delete fields[key];
  }
  done();
}
