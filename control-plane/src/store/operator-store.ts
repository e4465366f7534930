// Operator keys and the operator audit trail, behind the same async store interface as
// everything else.

export type OperatorScope = 'operator:read' | 'operator:write';

export interface OperatorKeyRecord {
  id: string;
  name: string | null;
  scopes: OperatorScope[];
  last4: string;
  createdAt: number;
  /** Who made it: an operator key id, or `local` for svcctl on the data dir. */
  createdBy: string;
  revokedAt: number | null;
}

export interface AuditRecord {
  seq: number;
  at: number;
  /** The operator key id that acted, or `local` (svcctl on the data dir). */
  actor: string;
  /** What was done, named like the operator API operation (e.g. `cordonNode`). */
  action: string;
  /** The thing acted on (node, instance, key id), when there is one. */
  target: string | null;
  detail: Record<string, unknown>;
}

export interface OperatorStore {
  createKey(key: OperatorKeyRecord, hash: Buffer): Promise<void>;
  getKey(id: string): Promise<OperatorKeyRecord | undefined>;
  listKeys(): Promise<OperatorKeyRecord[]>;
  findKeyByHash(hash: Buffer): Promise<{ key: OperatorKeyRecord; hash: Buffer } | undefined>;
  /** Marks the key revoked (the first time only) and returns it. */
  revokeKey(id: string, at: number): Promise<OperatorKeyRecord | undefined>;
  appendAudit(entry: Omit<AuditRecord, 'seq'>): Promise<AuditRecord>;
  /** Newest first. */
  listAudit(limit: number): Promise<AuditRecord[]>;
}
