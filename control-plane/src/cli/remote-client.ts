// The OperatorClient over HTTP: each method is one /ops/v1 call answering the same JSON
// the local client returns, so every command prints the same either way.
import type { OperatorClient } from '../operators/fleet-operations.js';

type R<K extends keyof OperatorClient> = ReturnType<OperatorClient[K]>;
type Query = Record<string, string | number | boolean | string[] | undefined>;

const seg = encodeURIComponent;

export class RemoteOperatorClient implements OperatorClient {
  constructor(
    private readonly baseUrl: string,
    private readonly key: string,
  ) {}

  private async call<T>(method: string, path: string, options: { query?: Query; body?: unknown } = {}): Promise<T> {
    const url = new URL(`${this.baseUrl}/ops/v1${path}`);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(v));
    }
    const sendsBody = method !== 'GET' && method !== 'DELETE';
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${this.key}`, ...(sendsBody ? { 'content-type': 'application/json' } : {}) },
        body: sendsBody ? JSON.stringify(options.body ?? {}) : undefined,
        redirect: 'error',
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new Error(`cannot reach ${this.baseUrl}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    }
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(`${this.baseUrl} answered ${res.status} with something other than JSON; is it the control plane?`);
    }
    if (!res.ok) {
      const error = (body as { error?: { message?: string } }).error;
      throw new Error(error?.message ?? `${method} ${path} answered ${res.status}`);
    }
    return body as T;
  }

  createKey = (input: Parameters<OperatorClient['createKey']>[0]): R<'createKey'> => this.call('POST', '/keys', { body: input });
  listKeys = (org?: string): R<'listKeys'> => this.call('GET', '/keys', { query: { org } });
  rotateKey = (keyId: string, overlapSeconds: number): R<'rotateKey'> => this.call('POST', `/keys/${seg(keyId)}/rotate`, { body: { overlap_seconds: overlapSeconds } });
  revokeKey = (keyId: string): R<'revokeKey'> => this.call('POST', `/keys/${seg(keyId)}/revoke`);

  listOrgs = (): R<'listOrgs'> => this.call('GET', '/orgs');
  showOrg = (ref: string): R<'showOrg'> => this.call('GET', `/orgs/${seg(ref)}`);
  createOrg = (name: string, tier: number): R<'createOrg'> => this.call('POST', '/orgs', { body: { name, tier } });
  updateOrg = (ref: string, patch: Parameters<OperatorClient['updateOrg']>[1]): R<'updateOrg'> => this.call('PATCH', `/orgs/${seg(ref)}`, { body: patch });

  billingAccount = (ref: string): R<'billingAccount'> => this.call('GET', `/orgs/${seg(ref)}/billing`);
  grantCredit = (ref: string, usd: string, note: string): R<'grantCredit'> => this.call('POST', `/orgs/${seg(ref)}/billing/credits`, { body: { usd, note } });
  configureBilling = (ref: string, patch: Parameters<OperatorClient['configureBilling']>[1]): R<'configureBilling'> => this.call('PATCH', `/orgs/${seg(ref)}/billing`, { body: patch });

  why = (ref: string): R<'why'> => this.call('GET', `/why/${seg(ref)}`);

  listNodes = (): R<'listNodes'> => this.call('GET', '/nodes');
  showNode = (ref: string, events: number): R<'showNode'> => this.call('GET', `/nodes/${seg(ref)}`, { query: { events } });
  nodeTimeline = (ref: string, limit: number, gpu?: string): R<'nodeTimeline'> => this.call('GET', `/nodes/${seg(ref)}/timeline`, { query: { limit, gpu } });
  listGpus = (filter: { pool?: string; unhealthy?: boolean } = {}): R<'listGpus'> => this.call('GET', '/gpus', { query: filter });
  setNodeState = (ref: string, action: Parameters<OperatorClient['setNodeState']>[1]): R<'setNodeState'> => this.call('POST', `/nodes/${seg(ref)}/${action}`);
  forgetNode = (ref: string): R<'forgetNode'> => this.call('POST', `/nodes/${seg(ref)}/forget`);
  freeGpus = (model: string, pool?: string): R<'freeGpus'> => this.call('GET', '/free-gpus', { query: { model, pool } });
  resetGpuHealth = (ref: string, gpu?: string): R<'resetGpuHealth'> => this.call('POST', `/nodes/${seg(ref)}/gpu-health-reset`, { body: gpu === undefined ? {} : { gpu } });
  getCommand = (id: string): R<'getCommand'> => this.call('GET', `/node-commands/${seg(id)}`);

  createToken = (input: { pool?: string; ttlSeconds?: number }): R<'createToken'> =>
    this.call('POST', '/enrollment-tokens', { body: { pool: input.pool, ttl: input.ttlSeconds === undefined ? undefined : `${input.ttlSeconds}s` } });
  listTokens = (): R<'listTokens'> => this.call('GET', '/enrollment-tokens');
  revokeToken = (id: string): R<'revokeToken'> => this.call('POST', `/enrollment-tokens/${seg(id)}/revoke`);

  listInstances = (input: { org?: string; statuses?: string[]; limit: number }): R<'listInstances'> =>
    this.call('GET', '/instances', { query: { org: input.org, status: input.statuses, limit: input.limit } });
  showInstance = (id: string): R<'showInstance'> => this.call('GET', `/instances/${seg(id)}`);
  terminateInstance = (id: string, force: boolean): R<'terminateInstance'> => this.call('POST', `/instances/${seg(id)}/terminate`, { body: { force } });
  listReplicas = (input: { all: boolean; limit: number }): R<'listReplicas'> => this.call('GET', '/replicas', { query: input });

  listWebhooks = (org?: string): R<'listWebhooks'> => this.call('GET', '/webhooks', { query: { org } });
  showWebhook = (id: string): R<'showWebhook'> => this.call('GET', `/webhooks/${seg(id)}`);
  createWebhook = (input: { org?: string; url: string; eventTypes: string[]; description?: string | null }): R<'createWebhook'> =>
    this.call('POST', '/webhooks', { body: { org: input.org, url: input.url, event_types: input.eventTypes, description: input.description ?? undefined } });
  deleteWebhook = (id: string): R<'deleteWebhook'> => this.call('DELETE', `/webhooks/${seg(id)}`);
  rotateWebhookSecret = (id: string, overlapSeconds: number): R<'rotateWebhookSecret'> => this.call('POST', `/webhooks/${seg(id)}/rotate-secret`, { body: { overlap_seconds: overlapSeconds } });
  listDeliveries = (id: string, limit: number): R<'listDeliveries'> => this.call('GET', `/webhooks/${seg(id)}/deliveries`, { query: { limit } });
  redeliver = (id: string, deliveryId: string): R<'redeliver'> => this.call('POST', `/webhooks/${seg(id)}/deliveries/${seg(deliveryId)}/redeliver`);

  createOperatorKey = (input: { scopes: string[]; name?: string | null }): R<'createOperatorKey'> =>
    this.call('POST', '/operator-keys', { body: { scopes: input.scopes, name: input.name ?? undefined } });
  listOperatorKeys = (): R<'listOperatorKeys'> => this.call('GET', '/operator-keys');
  revokeOperatorKey = (id: string): R<'revokeOperatorKey'> => this.call('POST', `/operator-keys/${seg(id)}/revoke`);
  listAudit = (limit: number): R<'listAudit'> => this.call('GET', '/audit', { query: { limit } });
}
