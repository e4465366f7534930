// Enrollment: the agent presents its one-time token once (Enroll RPC) and stores the node
// identity it receives. A refusal (UNAUTHENTICATED: unknown, used or revoked token;
// FAILED_PRECONDITION: protocol too old; INVALID_ARGUMENT) is final and carries the
// control plane's own message; anything else (control plane not up yet) is transient and
// left to the reconnect loop.
import { PROTOCOL_VERSION, type AgentGatewayClient, type EnrollResponse__Output } from '@svc/proto';
import type { Clock } from '@svc/shared';
import { readIdentity, writeIdentity, type NodeIdentity } from './identity-store.js';
import { isFinalStatus, SessionRefusedError, statusMessage } from '../session/session-errors.js';

const ENROLL_DEADLINE_MS = 10_000;

export interface EnrollmentInput {
  client: AgentGatewayClient;
  dataDir: string;
  token: string;
  hostname: string;
  pool: string;
  controlPlane: string;
  clock: Clock;
  signal: AbortSignal;
}

/** The stored identity, or a new one from Enroll. Throws SessionRefusedError when enrollment is refused or impossible. */
export async function ensureIdentity(input: EnrollmentInput): Promise<{ identity: NodeIdentity; enrolled: boolean }> {
  const stored = await readIdentity(input.dataDir);
  if (stored) return { identity: stored, enrolled: false };
  if (!input.token) {
    throw new SessionRefusedError(
      `this agent has no node identity in ${input.dataDir} and no enrollment token: ` +
        'create one on the control plane with `svcctl nodes token create` and start the agent with SVC_NODE_TOKEN=<token>',
    );
  }
  const response = await enroll(input);
  const identity: NodeIdentity = {
    node_id: response.node_id,
    node_secret: response.node_secret,
    control_plane: input.controlPlane,
    enrolled_at: new Date(input.clock.now()).toISOString(),
  };
  await writeIdentity(input.dataDir, identity);
  return { identity, enrolled: true };
}

function enroll(input: EnrollmentInput): Promise<EnrollResponse__Output> {
  return new Promise((resolve, reject) => {
    const call = input.client.Enroll(
      { token: input.token, hostname: input.hostname, pool: input.pool, protocol_version: PROTOCOL_VERSION },
      { deadline: Date.now() + ENROLL_DEADLINE_MS },
      (err, response) => {
        input.signal.removeEventListener('abort', cancel);
        if (err) {
          reject(isFinalStatus(err.code) ? new SessionRefusedError(`enrollment refused: ${statusMessage(err)}`, err.code) : err);
        } else if (!response?.node_id || !response.node_secret) {
          reject(new SessionRefusedError('enrollment answered without a node id or secret'));
        } else {
          resolve(response);
        }
      },
    );
    const cancel = (): void => call.cancel();
    input.signal.addEventListener('abort', cancel, { once: true });
  });
}

