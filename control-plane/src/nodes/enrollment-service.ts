// Enrollment: operators create one-time tokens; an agent exchanges one for a node
// identity (id + secret) and proves that identity in every Hello. Only SHA-256 digests of
// tokens and secrets are stored; values exist only in the answers that create them.
import { ApiError, newId, type Clock } from '@svc/shared';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '@svc/proto';
import { isPool, POOLS, type Pool } from '../models/pools.js';
import type { EnrollmentTokenRecord, NodeRecord, NodeStore } from '../store/node-store.js';
import {
  enrollRefusal,
  generateEnrollmentToken,
  generateNodeSecret,
  hashSecret,
  secretMatches,
  tokenState,
} from './node-credentials.js';
import { NodeRefusal } from './refusal.js';

export interface CreatedToken {
  record: EnrollmentTokenRecord;
  value: string;
}

export interface EnrollInput {
  token: string;
  hostname: string;
  pool: string;
  protocolVersion: number;
}

/** Refuses agents older than MIN_PROTOCOL_VERSION, naming both versions. */
export function checkProtocolVersion(version: number): void {
  if (version < MIN_PROTOCOL_VERSION) {
    throw new NodeRefusal(
      'failed_precondition',
      `agent protocol version ${version} is older than the oldest this control plane accepts (${MIN_PROTOCOL_VERSION}; ` +
        `it speaks ${PROTOCOL_VERSION}); upgrade the node agent`,
    );
  }
}

export class EnrollmentService {
  constructor(
    private readonly nodes: NodeStore,
    private readonly clock: Clock,
    private readonly defaultTtlSeconds: number,
  ) {}

  async createToken(options: { pool?: string; ttlSeconds?: number } = {}): Promise<CreatedToken> {
    if (options.pool !== undefined && !isPool(options.pool)) {
      throw new ApiError('invalid_request', `unknown pool "${options.pool}"; pools are: ${POOLS.join(', ')}`, { param: 'pool' });
    }
    const ttl = options.ttlSeconds ?? this.defaultTtlSeconds;
    if (!Number.isInteger(ttl) || ttl <= 0) throw new ApiError('invalid_request', 'the token TTL must be a positive number of seconds', { param: 'ttl' });
    const value = generateEnrollmentToken();
    const now = this.clock.now();
    const record: EnrollmentTokenRecord = {
      id: newId('ntk'),
      hash: hashSecret(value),
      pool: (options.pool as Pool | undefined) ?? null,
      createdAt: now,
      expiresAt: now + ttl * 1000,
      usedAt: null,
      usedByNode: null,
      revokedAt: null,
    };
    await this.nodes.createToken(record);
    return { record, value };
  }

  listTokens(): Promise<EnrollmentTokenRecord[]> {
    return this.nodes.listTokens();
  }

  async revokeToken(id: string): Promise<EnrollmentTokenRecord> {
    const token = await this.nodes.revokeToken(id, this.clock.now());
    if (!token) throw new ApiError('not_found', `no enrollment token with id ${id}`);
    return token;
  }

  /** Uses the token once and returns the new node's identity; refusals say why. */
  async enroll(input: EnrollInput): Promise<{ node: NodeRecord; secret: string }> {
    checkProtocolVersion(input.protocolVersion);
    if (!input.token) throw new NodeRefusal('unauthenticated', 'no enrollment token given; set SVC_NODE_TOKEN');
    if (input.pool && !isPool(input.pool)) {
      throw new NodeRefusal('invalid_argument', `unknown pool "${input.pool}"; pools are: ${POOLS.join(', ')}`);
    }
    const now = this.clock.now();
    const tokenHash = hashSecret(input.token);
    const token = await this.nodes.getTokenByHash(tokenHash);
    // Say why an unusable token is refused before judging anything else about the request.
    if (!token || tokenState(token, now) !== 'active') throw new NodeRefusal('unauthenticated', enrollRefusal(token, now));
    // A token made for one pool cannot enroll a node into another.
    if (token?.pool && input.pool && input.pool !== token.pool) {
      throw new NodeRefusal('invalid_argument', `enrollment token ${token.id} is for pool ${token.pool}, but the agent asked for pool ${input.pool}`);
    }
    const secret = generateNodeSecret();
    const node: NodeRecord = {
      id: newId('node'),
      hostname: input.hostname || 'unknown',
      pool: token?.pool ?? ((input.pool || 'na') as Pool),
      status: 'enrolled',
      cordoned: false,
      draining: false,
      hostFacts: null,
      agentVersion: '',
      protocolVersion: input.protocolVersion,
      enrolledAt: now,
      connectedAt: null,
      lastSeenAt: null,
    };
    // The store uses the token atomically: of two agents racing with one token, one wins.
    const outcome = await this.nodes.enroll(tokenHash, now, node, hashSecret(secret));
    if (!outcome.enrolled) throw new NodeRefusal('unauthenticated', enrollRefusal(outcome.token, now));
    return { node, secret };
  }

  /** The node a Hello names, if its secret matches. */
  async authenticate(nodeId: string, secret: string): Promise<NodeRecord> {
    const refuse = (): never => {
      throw new NodeRefusal(
        'unauthenticated',
        `node ${nodeId || '(none)'} is unknown or its secret is wrong; if the node was removed or its identity file lost, ` +
          'enroll it again with a new token (svcctl nodes token create)',
      );
    };
    if (!nodeId || !secret) return refuse();
    const hash = await this.nodes.getNodeSecretHash(nodeId);
    if (!hash || !secretMatches(secret, hash)) return refuse();
    const node = await this.nodes.getNode(nodeId);
    return node ?? refuse();
  }
}
