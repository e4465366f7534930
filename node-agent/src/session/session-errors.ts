// How the session classifies failures. The reconnect loop retries everything except a
// refusal: the control plane said no (bad token, unknown node, protocol too old) and
// retrying would only repeat it, so the agent stops with the server's message.
import * as grpc from '@grpc/grpc-js';

/** gRPC codes that mean "the control plane refuses you", not "try again later". */
const FINAL_CODES = new Set<grpc.status>([
  grpc.status.UNAUTHENTICATED,
  grpc.status.PERMISSION_DENIED,
  grpc.status.FAILED_PRECONDITION,
  grpc.status.INVALID_ARGUMENT,
]);

export function isFinalStatus(code: grpc.status | undefined): boolean {
  return code !== undefined && FINAL_CODES.has(code);
}

/** The server's own message of a gRPC error ("13 INTERNAL: x" -> "x (INTERNAL)"). */
export function statusMessage(err: Partial<grpc.ServiceError>): string {
  const name = err.code !== undefined ? grpc.status[err.code] : undefined;
  const details = err.details || err.message || 'no message';
  return name ? `${details} (${name})` : details;
}

/** Final: the agent must not retry. */
export class SessionRefusedError extends Error {
  constructor(
    message: string,
    readonly code?: grpc.status,
  ) {
    super(message);
    this.name = 'SessionRefusedError';
  }
}

/** The session ended (stream closed, protocol broken); the reconnect loop retries. */
export class SessionEndedError extends Error {
  constructor(message: string, options?: ErrorOptions & { code?: grpc.status }) {
    super(message, options);
    this.name = 'SessionEndedError';
    this.code = options?.code;
  }
  readonly code: grpc.status | undefined;
}
