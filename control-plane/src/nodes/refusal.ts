// Why the registry refuses an agent, in words the agent prints. The gateway maps each
// reason to one gRPC status code (agents/status-codes.ts); nothing here knows gRPC.

export type RefusalReason = 'unauthenticated' | 'invalid_argument' | 'failed_precondition';

export class NodeRefusal extends Error {
  constructor(
    readonly reason: RefusalReason,
    message: string,
  ) {
    super(message);
    this.name = 'NodeRefusal';
  }
}
