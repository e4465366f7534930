// What an operator can do to the fleet, as one set of methods that answer the JSON views
// svcctl prints with --json and the operator API sends. The local svcctl client calls
// them on the data dir; the /ops/v1 routes call them in the server: both read the same
// answer, so a command prints the same locally and remotely. Every write appends an audit
// row naming who acted (an operator key id, or `local` for svcctl on the data dir).
import { ApiError, toRfc3339, type Clock } from '@svc/shared';
import type { Services } from '../app.js';
import type { ControlPlaneConfig } from '../config.js';
import { instanceView } from '../instances/instance-service.js';
import type { InstanceRecord } from '../instances/instance-record.js';
import { INSTANCE_STATUSES, type InstanceStatus } from '../instances/lifecycle.js';
import { isPool } from '../models/pools.js';
import { forgetNode } from '../nodes/forget-node.js';
import { tokenState } from '../nodes/node-credentials.js';
import { commandView, gpuView, nodeView, timelineView } from '../nodes/views.js';
import { replicaView } from '../replicas/views.js';
import { keyView, orgView } from '../routes/views.js';
import type { EnrollmentTokenRecord } from '../store/node-store.js';
import type { AuditRecord } from '../store/operator-store.js';
import type { KeyKind } from '../store/records.js';
import type { Store } from '../store/store.js';
import { deliveryView, webhookView } from '../webhooks/views.js';
import { OperatorKeyService, operatorKeyView } from './operator-key-service.js';
import { billingAccountView, usdToNanos } from '../billing/billing-service.js';
import type { BillingMode } from '../store/ledger-store.js';
import { buildWhyReport } from '../incidents/why-report.js';

export interface FleetDeps {
  services: Services;
  store: Store;
  config: ControlPlaneConfig;
  clock: Clock;
}

export type NodeAction = 'cordon' | 'uncordon' | 'drain';

export interface OrgPatchInput {
  tier?: number;
  ip_allowlist?: string[];
  referrer_allowlist?: string[];
  /** null: every model. */
  allowed_models?: string[] | null;
  /** null: the default (SVC_ORG_MAX_GPUS). */
  gpu_quota?: number | null;
}

const list = <T>(data: T[]) => ({ object: 'list' as const, data });

function tokenView(token: EnrollmentTokenRecord, now: number) {
  return {
    id: token.id,
    pool: token.pool,
    state: tokenState(token, now),
    created_at: toRfc3339(token.createdAt),
    expires_at: toRfc3339(token.expiresAt),
    used_at: token.usedAt === null ? null : toRfc3339(token.usedAt),
    used_by_node: token.usedByNode,
    revoked_at: token.revokedAt === null ? null : toRfc3339(token.revokedAt),
  };
}

function auditView(entry: AuditRecord) {
  return { seq: entry.seq, at: toRfc3339(entry.at), actor: entry.actor, action: entry.action, target: entry.target, detail: entry.detail };
}

export class FleetOperations {
  private readonly operatorKeys: OperatorKeyService;

  constructor(
    private readonly deps: FleetDeps,
    /** Who acts: an operator key id, or `local`. */
    private readonly actor: string,
  ) {
    this.operatorKeys = new OperatorKeyService(deps.store.operators, deps.clock);
  }

  private get services(): Services {
    return this.deps.services;
  }

  private async audit(action: string, target: string | null, detail: Record<string, unknown> = {}): Promise<void> {
    await this.deps.store.operators.appendAudit({ at: this.deps.clock.now(), actor: this.actor, action, target, detail });
  }

  // Customer API keys, across orgs.

  async createKey(input: { org?: string; kind?: KeyKind; scopes?: string[]; admin?: boolean; name?: string | null }) {
    const org = input.org ? await this.services.orgs.resolve(input.org) : (await this.services.orgs.ensureDefaultOrg()).org;
    const created = await this.services.keys.create({ orgId: org.id, kind: input.kind ?? 'live', scopes: input.scopes, admin: input.admin ?? false, name: input.name ?? null });
    await this.audit('createKey', created.record.id, { org_id: org.id, kind: created.record.kind, scopes: created.record.scopes, admin: created.record.admin });
    return { ...keyView(created.record), key: created.value, org_name: org.name };
  }

  async listKeys(org?: string) {
    const orgId = org ? (await this.services.orgs.resolve(org)).id : undefined;
    return list((await this.services.keys.list(orgId)).map(keyView));
  }

  async rotateKey(keyId: string, overlapSeconds: number) {
    const rotated = await this.services.keys.rotate(keyId, overlapSeconds);
    await this.audit('rotateKey', keyId, { overlap_seconds: overlapSeconds });
    return { ...keyView(rotated.record), key: rotated.value, old_key_expires_at: toRfc3339(rotated.oldKeyExpiresAt) };
  }

  async revokeKey(keyId: string) {
    const key = await this.services.keys.revoke(keyId);
    await this.audit('revokeKey', keyId, { org_id: key.orgId });
    return { key_id: key.id, revoked: true, revoked_at: toRfc3339(key.revokedAt!) };
  }

  // Orgs.

  async listOrgs() {
    return list((await this.services.orgs.list()).map(orgView));
  }

  async showOrg(ref: string) {
    return orgView(await this.services.orgs.resolve(ref));
  }

  async createOrg(name: string, tier: number) {
    if (tier !== 2 && tier !== 3) throw new ApiError('invalid_request', 'tier must be 2 or 3', { param: 'tier' });
    const org = await this.services.orgs.create(name, tier);
    await this.audit('createOrg', org.id, { name, tier });
    return orgView(org);
  }

  async updateOrg(ref: string, patch: OrgPatchInput) {
    const target = await this.services.orgs.resolve(ref);
    const updated = await this.services.orgs.update(target.id, {
      tier: patch.tier,
      ipAllowlist: patch.ip_allowlist,
      referrerAllowlist: patch.referrer_allowlist,
      allowedModels: patch.allowed_models,
      gpuQuota: patch.gpu_quota,
    });
    await this.audit('updateOrg', target.id, { ...patch });
    return orgView(updated);
  }

  // Billing accounts: prepaid/postpaid, credit grants, limits (tier and credit are the provider's).

  async billingAccount(ref: string) {
    const org = await this.services.orgs.resolve(ref);
    return billingAccountView(await this.services.billing.account(org.id));
  }

  async grantCredit(ref: string, usd: string, note: string) {
    const org = await this.services.orgs.resolve(ref);
    const amountNanos = usdToNanos(usd, 'usd');
    const account = await this.services.billing.grant(org.id, amountNanos, note, this.actor);
    await this.audit('grantCredit', org.id, { amount_nanos: amountNanos, note });
    return billingAccountView(account);
  }

  async configureBilling(ref: string, patch: { mode?: BillingMode; credit_limit?: string | null; low_balance?: string | null }) {
    const org = await this.services.orgs.resolve(ref);
    const nanos = (value: string | null | undefined, param: string) => (value === undefined ? undefined : value === null ? null : usdToNanos(value, param));
    const account = await this.services.billing.configure(org.id, {
      ...(patch.mode !== undefined ? { mode: patch.mode } : {}),
      ...(patch.credit_limit !== undefined ? { creditLimitNanos: nanos(patch.credit_limit, 'credit_limit') } : {}),
      ...(patch.low_balance !== undefined ? { lowBalanceNanos: nanos(patch.low_balance, 'low_balance') } : {}),
    });
    await this.audit('configureBilling', org.id, { ...patch });
    return billingAccountView(account);
  }

  // Incidents.

  /** `svcctl why`: the incident view of a node, a GPU or an instance, as data (the CLI renders it). */
  async why(ref: string) {
    return buildWhyReport(this.deps.store, ref, this.deps.clock.now());
  }

  // Nodes and GPUs.

  async listNodes() {
    const now = this.deps.clock.now();
    return list((await this.services.nodes.list()).map(({ node, gpus }) => nodeView(node, gpus, now)));
  }

  async showNode(ref: string, events: number) {
    const now = this.deps.clock.now();
    const detail = await this.services.nodes.show(ref, events);
    return {
      ...nodeView(detail.node, detail.gpus, now),
      host_facts: detail.node.hostFacts,
      gpus: detail.gpus.map(gpuView),
      timeline: detail.timeline.map(timelineView),
      pending_commands: detail.commands.map(commandView),
    };
  }

  /** The health timeline of a node (newest first), optionally of one GPU (uuid or index). */
  async nodeTimeline(ref: string, limit: number, gpu?: string) {
    const detail = await this.services.nodes.show(ref, limit);
    const rows = detail.timeline.map(timelineView);
    return list(gpu === undefined ? rows : rows.filter((e) => e.gpu_uuid === gpu || String(e.gpu_index) === gpu));
  }

  /** Every GPU of the fleet with its node, pool and health. */
  async listGpus(filter: { pool?: string; unhealthy?: boolean } = {}) {
    const rows = (await this.services.nodes.list()).flatMap(({ node, gpus }) =>
      gpus.map((g) => ({ node_id: node.id, hostname: node.hostname, pool: node.pool, ...gpuView(g) })),
    );
    return list(rows.filter((g) => (filter.pool === undefined || g.pool === filter.pool) && (!filter.unhealthy || !g.healthy)));
  }

  async setNodeState(ref: string, action: NodeAction) {
    const node = await this.services.nodes[action](ref);
    await this.audit(`${action}Node`, node.id);
    const view = nodeView(node, [], this.deps.clock.now());
    return { id: view.id, hostname: view.hostname, status: view.status, status_label: view.status_label, cordoned: view.cordoned, draining: view.draining, schedulable: view.schedulable };
  }

  async forgetNode(ref: string) {
    const found = await this.services.nodes.resolve(ref);
    const { node, settled } = await forgetNode(
      { nodes: this.deps.store.nodes, instances: this.services.instances, clock: this.deps.clock, forgetAfterMs: this.deps.config.nodeForgetAfterMs },
      found,
    );
    await this.audit('forgetNode', node.id, { settled: settled.map((i) => i.id) });
    return {
      id: node.id,
      hostname: node.hostname,
      last_seen_at: node.lastSeenAt === null ? null : toRfc3339(node.lastSeenAt),
      forgotten_at: node.forgottenAt == null ? null : toRfc3339(node.forgottenAt),
      instances: settled.map((i) => ({ id: i.id, status: i.status })),
    };
  }

  async freeGpus(model: string, pool?: string) {
    if (pool !== undefined && !isPool(pool)) throw new ApiError('invalid_request', `unknown pool "${pool}"; pools are: na, eu, apac`, { param: 'pool' });
    const found = await this.services.nodes.schedulable({ gpuModel: model, pool });
    return list(found.map((n) => ({ node_id: n.nodeId, pool: n.pool, free_gpu_uuids: n.freeGpuUuids })));
  }

  async resetGpuHealth(ref: string, gpu?: string) {
    const command = await this.services.nodes.requestGpuHealthReset(ref, gpu ?? '');
    await this.audit('resetGpuHealth', command.nodeId, { gpu: gpu ?? null, command_id: command.id });
    return commandView(command);
  }

  async getCommand(id: string) {
    return commandView(await this.services.nodes.getCommand(id));
  }

  // Enrollment tokens.

  async createToken(input: { pool?: string; ttlSeconds?: number }) {
    const created = await this.services.enrollment.createToken(input);
    await this.audit('createEnrollmentToken', created.record.id, { pool: created.record.pool });
    return { ...tokenView(created.record, this.deps.clock.now()), token: created.value };
  }

  async listTokens() {
    const now = this.deps.clock.now();
    return list((await this.services.enrollment.listTokens()).map((t) => tokenView(t, now)));
  }

  async revokeToken(id: string) {
    const token = await this.services.enrollment.revokeToken(id);
    await this.audit('revokeEnrollmentToken', id);
    return tokenView(token, this.deps.clock.now());
  }

  // Instances and replicas, across orgs.

  async listInstances(input: { org?: string; statuses?: string[]; limit: number }) {
    const bad = input.statuses?.find((s) => !(INSTANCE_STATUSES as readonly string[]).includes(s));
    if (bad !== undefined) throw new ApiError('invalid_request', `unknown status "${bad}"; statuses are: ${INSTANCE_STATUSES.join(', ')}`, { param: 'status' });
    const statuses = input.statuses as InstanceStatus[] | undefined;
    const orgs = input.org ? [await this.services.orgs.resolve(input.org)] : await this.services.orgs.list();
    const rows: InstanceRecord[] = [];
    for (const org of orgs) rows.push(...(await this.deps.store.instances.list(org.id, { statuses, limit: input.limit })).data);
    return list(rows.map((r) => ({ ...instanceView(r), org_id: r.orgId })));
  }

  async showInstance(id: string) {
    const record = await this.deps.store.instances.get(id);
    if (!record) throw new ApiError('not_found', `no instance with id ${id}`);
    return { ...instanceView(record), org_id: record.orgId };
  }

  async terminateInstance(id: string, force: boolean) {
    const record = await this.deps.store.instances.get(id);
    if (!record) throw new ApiError('not_found', `no instance with id ${id}`);
    const updated = await this.services.instances.terminate(record.orgId, id, force);
    await this.audit('terminateInstance', id, { org_id: record.orgId, force });
    return { ...instanceView(updated), org_id: updated.orgId, stop_pending_delivery: updated.stop != null && updated.stop.sentAt == null };
  }

  async listReplicas(input: { all: boolean; limit: number }) {
    return list((await this.services.replicas.list({ includeEnded: input.all, limit: input.limit })).map(replicaView));
  }

  // Webhooks, across orgs.

  async listWebhooks(org?: string) {
    const orgId = org ? (await this.services.orgs.resolve(org)).id : undefined;
    return list((await this.services.webhooks.list(orgId)).map(webhookView));
  }

  async showWebhook(id: string) {
    return webhookView(await this.services.webhooks.get(id));
  }

  async createWebhook(input: { org?: string; url: string; eventTypes: string[]; description?: string | null }) {
    const org = input.org ? await this.services.orgs.resolve(input.org) : (await this.services.orgs.ensureDefaultOrg()).org;
    const created = await this.services.webhooks.create({ orgId: org.id, url: input.url, eventTypes: input.eventTypes, description: input.description ?? null });
    await this.audit('createWebhook', created.subscription.id, { org_id: org.id, url: input.url });
    return { ...webhookView(created.subscription), secret: created.secret, org_name: org.name };
  }

  async deleteWebhook(id: string) {
    const deleted = await this.services.webhooks.delete(id);
    await this.audit('deleteWebhook', id, { org_id: deleted.orgId });
    return { id: deleted.id, object: 'webhook', deleted: true, url: deleted.url };
  }

  async rotateWebhookSecret(id: string, overlapSeconds: number) {
    const rotated = await this.services.webhooks.rotateSecret(id, overlapSeconds);
    await this.audit('rotateWebhookSecret', id, { overlap_seconds: overlapSeconds });
    return { ...webhookView(rotated.subscription), secret: rotated.secret, old_secret_expires_at: toRfc3339(rotated.oldSecretExpiresAt) };
  }

  async listDeliveries(id: string, limit: number) {
    return list((await this.services.webhooks.deliveries(id, { limit })).map(deliveryView));
  }

  async redeliver(id: string, deliveryId: string) {
    const d = await this.services.webhooks.redeliver(id, deliveryId);
    await this.audit('redeliverWebhook', id, { delivery_id: deliveryId });
    return { id: d.id, object: 'webhook.delivery', status: d.status, next_attempt_at: d.nextAttemptAt === null ? null : toRfc3339(d.nextAttemptAt) };
  }

  // Operator keys and the audit trail.

  async createOperatorKey(input: { scopes: string[]; name?: string | null }) {
    const created = await this.operatorKeys.create({ ...input, createdBy: this.actor });
    await this.audit('createOperatorKey', created.record.id, { scopes: created.record.scopes });
    return { ...operatorKeyView(created.record), key: created.value };
  }

  async listOperatorKeys() {
    return list((await this.operatorKeys.list()).map(operatorKeyView));
  }

  async revokeOperatorKey(id: string) {
    const key = await this.operatorKeys.revoke(id);
    await this.audit('revokeOperatorKey', id);
    return operatorKeyView(key);
  }

  async listAudit(limit: number) {
    return list((await this.deps.store.operators.listAudit(limit)).map(auditView));
  }
}

/**
 * What svcctl calls: the local operations on the data dir, or the operator API over HTTP.
 * It follows from FleetOperations, so a new operator command (`svcctl why …`, say) is a
 * method here, a route in routes/ops-api.ts and a line in cli/remote-client.ts, which does
 * not compile until it has it.
 */
export type OperatorClient = {
  [K in keyof FleetOperations as FleetOperations[K] extends (...args: never[]) => unknown ? K : never]: FleetOperations[K];
};
