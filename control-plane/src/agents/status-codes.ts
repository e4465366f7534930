// The gRPC status codes the agent gateway answers with, what each means and what the
// agent should do. docs/nodes.md carries the same table; agents retry only the codes
// marked retryable (with their backoff), and print the message of the others.
import { status } from '@grpc/grpc-js';
import type { RefusalReason } from '../nodes/refusal.js';

export interface StatusMeaning {
  code: status;
  retryable: boolean;
  meaning: string;
}

export const GATEWAY_STATUS_CODES = {
  OK: { code: status.OK, retryable: true, meaning: 'The control plane ended the session cleanly (it is shutting down); reconnect.' },
  UNAUTHENTICATED: {
    code: status.UNAUTHENTICATED,
    retryable: false,
    meaning: 'Enroll: the token is unknown, used, expired or revoked. Connect: unknown node id or wrong node secret. Re-enroll with a new token.',
  },
  FAILED_PRECONDITION: {
    code: status.FAILED_PRECONDITION,
    retryable: false,
    meaning: 'The agent speaks a protocol version older than MIN_PROTOCOL_VERSION; the message names both. Upgrade the agent.',
  },
  INVALID_ARGUMENT: {
    code: status.INVALID_ARGUMENT,
    retryable: false,
    meaning: 'A malformed request: the first Connect message is not Hello, a second Hello, or an unknown pool at enrollment.',
  },
  ABORTED: {
    code: status.ABORTED,
    retryable: true,
    meaning: 'A newer session of the same node replaced this one (a restarted agent). Two agents sharing one identity will keep replacing each other.',
  },
  DEADLINE_EXCEEDED: { code: status.DEADLINE_EXCEEDED, retryable: true, meaning: 'No Hello arrived within 10 s of opening the stream.' },
  RESOURCE_EXHAUSTED: {
    code: status.RESOURCE_EXHAUSTED,
    retryable: true,
    meaning:
      'Connect: the agent stopped reading (more control messages queued than the backpressure limit allows). ' +
      'Enroll or Connect: too many refused tokens or node secrets from the agent\'s address (60 a minute); the message says when to retry.',
  },
  UNAVAILABLE: { code: status.UNAVAILABLE, retryable: true, meaning: 'The control plane is unreachable or restarting (from the gRPC library).' },
  INTERNAL: { code: status.INTERNAL, retryable: true, meaning: 'The control plane could not record something the agent sent (a store failure); reconnect and resend.' },
} as const satisfies Record<string, StatusMeaning>;

const REFUSAL_CODES: Record<RefusalReason, status> = {
  unauthenticated: status.UNAUTHENTICATED,
  invalid_argument: status.INVALID_ARGUMENT,
  failed_precondition: status.FAILED_PRECONDITION,
  too_many_attempts: status.RESOURCE_EXHAUSTED,
};

export const refusalStatus = (reason: RefusalReason): status => REFUSAL_CODES[reason];
