// Requests Node's HTTP server answers before fastify sees them still get the error
// envelope: what its parser refuses (headers past 16 KB, a malformed request line,
// headers that never finish; fastify's `clientErrorHandler`), and CONNECT, which Node
// hands to a 'connect' listener or else closes without a word.
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import { ApiError } from '@svc/shared';

/** The envelope for a parser error code (Node's `HPE_*` and `ERR_HTTP_*`). */
export function clientErrorFor(code: string | undefined): ApiError {
  if (code === 'HPE_HEADER_OVERFLOW') {
    return new ApiError('headers_too_large', 'the request line and headers exceed 16 KB; send large values in the body');
  }
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT' || code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    return new ApiError('request_timeout', 'the request headers did not arrive in time');
  }
  return new ApiError('invalid_request', `malformed HTTP request${code ? ` (${code})` : ''}`);
}

/** The whole HTTP/1.1 response, with `Connection: close`: the parser cannot go on after an error. */
export function rawErrorResponse(error: ApiError): string {
  const body = JSON.stringify(error.toBody());
  return (
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? 'Error'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has no one left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // A request whose answer is already on its way (e.g. its body broke after it was
  // answered) gets no second, unsolicited one. `_httpMessage` is the response in flight
  // on this socket; Node's own default handler checks the same. Earlier answers on a
  // kept-alive connection do not count.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (!socket.writable || inFlight?.headersSent) return void socket.destroy(err);
  // end() rather than destroy(): closing with unread request bytes would send a TCP RST
  // that can reach the client before it reads the answer.
  socket.end(rawErrorResponse(clientErrorFor(err.code)));
  // A peer that never closes its side does not hold the socket forever.
  setTimeout(() => socket.destroy(), 5_000).unref();
}

/** CONNECT (a tunnel request) is no method of this API: 405 in the envelope, then close. */
export function refuseConnect(server: Server): void {
  server.on('connect', (request: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => socket.destroy());
    socket.end(rawErrorResponse(new ApiError('method_not_allowed', `CONNECT is not allowed on ${request.url ?? '/'}; this server is no proxy`)));
  });
}
