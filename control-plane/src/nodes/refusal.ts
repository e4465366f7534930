// Why the registry refuses an agent, in words the agent prints. The gateway maps each
// reason to one gRPC status code (agents/status-codes.ts); nothing here knows gRPC.

export type RefusalReason = 'unauthenticated' | 'invalid_argument' | 'failed_precondition' | 'too_many_attempts';

export class NodeRefusal extends Error {
  constructor(
    readonly reason: RefusalReason,
    message: string,
    /** Whether the agent should try again later (only a refusal for too many attempts). */
    readonly retryable = false,
  ) {
    super(message);
    this.name = 'NodeRefusal';
  }
}
