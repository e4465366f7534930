// Enrollment: operators create one-time tokens; an agent exchanges one for a node
// identity (id + secret) and proves that identity in every Hello. Only SHA-256 digests of
// tokens and secrets are stored; values exist only in the answers that create them.
// Anyone who reaches the gRPC port can send a token or a node secret, and each costs a
// store lookup (on PostgreSQL, a round trip to the shared database): refused ones are
// capped per agent address with the same guard as unknown API keys (60 a minute, then
// RESOURCE_EXHAUSTED, which agents retry with backoff). A node whose id and secret verified
// on this process before is never held back, so a neighbour spraying secrets from the same
// address cannot keep a working node from reconnecting.
import { ApiError, newId, type Clock } from '@svc/shared';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '@svc/proto';
import { isPool, POOLS, type Pool } from '../models/pools.js';
import type { EnrollmentTokenRecord, NodeRecord, NodeStore } from '../store/node-store.js';
import {
  enrollRefusal,
  generateEnrollmentToken,
  generateNodeSecret,
  hashSecret,
  digestMatches,
  tokenState,
} from './node-credentials.js';
import { UnknownKeyGuard } from '../pipeline/unknown-key-guard.js';
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
  /** The agent's network address, for the cap on refused tokens; in-process callers have none. */
  address?: string;
}

/** Nodes remembered as verified on this process, at most; past it the memory starts over. */
const MAX_VERIFIED_NODES = 100_000;

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
  /** Node id -> digest of the secret that verified on this process. */
  private readonly verified = new Map<string, string>();

  constructor(
    private readonly nodes: NodeStore,
    private readonly clock: Clock,
    private readonly defaultTtlSeconds: number,
    private readonly refused = new UnknownKeyGuard(clock),
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
    if (input.address !== undefined) this.holdBack(input.address, 'enrollment tokens');
    const now = this.clock.now();
    const tokenHash = hashSecret(input.token);
    const token = await this.nodes.getTokenByHash(tokenHash);
    // Say why an unusable token is refused before judging anything else about the request.
    if (!token || tokenState(token, now) !== 'active') {
      if (input.address !== undefined) this.refused.unknown(input.address);
      throw new NodeRefusal('unauthenticated', enrollRefusal(token, now));
    }
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

  /** The node a Hello names, if its secret matches. `address`: the agent's, for the cap on refused secrets. */
  async authenticate(nodeId: string, secret: string, address?: string): Promise<NodeRecord> {
    const refuse = (): never => {
      if (address !== undefined) this.refused.unknown(address);
      throw new NodeRefusal(
        'unauthenticated',
        `node ${nodeId || '(none)'} is unknown or its secret is wrong; if the node was removed or its identity file lost, ` +
          'enroll it again with a new token (svcctl nodes token create)',
      );
    };
    const digest = hashSecret(secret);
    const presented = digest.toString('base64');
    if (address !== undefined && this.verified.get(nodeId) !== presented) this.holdBack(address, 'node secrets');
    if (!nodeId || !secret) return refuse();
    const hash = await this.nodes.getNodeSecretHash(nodeId);
    if (!hash || !digestMatches(digest, hash)) return refuse();
    const node = await this.nodes.getNode(nodeId);
    if (!node) return refuse();
    if (this.verified.size >= MAX_VERIFIED_NODES) this.verified.clear();
    this.verified.set(nodeId, presented);
    return node;
  }

  /** Refuses, for now, an address whose refused attempts used up its allowance. */
  private holdBack(address: string, what: string): void {
    const held = this.refused.heldBack(address);
    if (!held) return;
    throw new NodeRefusal('too_many_attempts', `too many refused ${what} from ${held.from}; retry after ${held.seconds}s`, true);
  }
}
