// Picks the replica that serves an inference request: by model, quantization (default:
// the cheapest variant with live capacity) and pool (pinned by X-Service-Pool, otherwise
// the healthiest pool, ties broken by the configured order), then the replica with the
// fewest requests in flight. A replica whose request fails is ejected and probed back
// with backoff. Every refusal is one of the spec's errors, never a wait.
//
// A failure that may be the request's doing (a 5xx, a timeout, a stream broken off) only
// makes the replica suspect: it is probed at once and ejected if the probe fails, or once
// requests of two organizations failed on it without a success between. Ejected on the
// first such failure, one tenant sending a request that makes the engine fail could keep
// every replica of a model out of service for everyone, one per attempt.
//
// A variant's slots (its replicas in a pool, each taking `maxOutstandingPerReplica`) are
// shared between organizations: one org may hold at most `maxTenantShare` of them, so a
// tenant running long streams cannot leave the next one nothing but no_capacity, and once
// half the slots are taken, at most an equal share among the orgs holding any (max-min
// fairness at admission: a slot that frees goes to whoever is under its share). Past it,
// 429: the limit is the org's own use, and a retry soon finds a slot. Counted in this
// process, over its part of the slots: when several control-plane processes share a
// database, each takes an even part of every replica's limit (fleet-share.ts), so
// together they never send a replica more than the limit, nor an org more than its share.
import { ApiError } from '@svc/shared';
import type { CatalogModel, Pool, Quantization } from '../models/catalog.js';
import type { LiveReplica, ReplicaDirectory, ServingPlan } from './replica-source.js';

export interface RouterOptions {
  poolOrder: readonly Pool[];
  /** Requests in flight one replica may hold, from every control-plane process together. */
  maxOutstandingPerReplica: number;
  /** This process's part of a limit all control-plane processes share; absent: all of it. */
  part?: (limit: number) => number;
  /** Share (0-1] of a variant's slots in a pool one organization may hold. */
  maxTenantShare: number;
  /** First ejection; doubles with each failed probe up to `maxEjectMs`. */
  ejectMs: number;
  maxEjectMs: number;
  /** Health probe of an ejected replica: true when it answers healthy. */
  probe(replica: LiveReplica): Promise<boolean>;
  /** Quantizations of a model, cheapest first (from its rate card). */
  byPrice(model: CatalogModel): readonly Quantization[];
}

export interface RouteRequest {
  /** The organization the request is for: slots are shared fairly between them. */
  tenant: string;
  model: CatalogModel;
  quantization?: Quantization | undefined;
  pool?: Pool | undefined;
  /** Replicas to avoid: those that already failed this request. */
  exclude?: ReadonlySet<string>;
}

export interface Lease {
  replica: LiveReplica;
  /** Call exactly once (see ReleaseOutcome). */
  release(outcome: ReleaseOutcome): void;
}

/**
 * How a leased request ended: `ok` (answered, even with a 4xx), `failed` (the replica's
 * fault whatever was asked: unreachable, refused our key; ejects it), `suspect` (failed in
 * a way the request may have caused: see the top).
 */
export type ReleaseOutcome = 'ok' | 'failed' | 'suspect';

/** Slots held in one variant's pool (model, quantization, pool): in all, and by organization. */
interface Holdings {
  total: number;
  byTenant: Map<string, number>;
}

/** Past this share of a variant's slots in use, each org is held to an equal share. */
const CONTENDED = 0.5;

interface Ejection {
  failures: number;
  timer: NodeJS.Timeout;
}

export class Router {
  private readonly outstanding = new Map<string, number>();
  private readonly holdings = new Map<string, Holdings>();
  private leased = 0;
  private readonly idleWaiters = new Set<() => void>();
  private readonly ejected = new Map<string, Ejection>();
  /** Organizations whose requests failed on a replica since its last success. */
  private readonly suspicions = new Map<string, Set<string>>();
  private readonly probing = new Set<string>();
  private turn = 0;

  constructor(
    private readonly directory: ReplicaDirectory,
    private readonly plan: ServingPlan,
    private readonly options: RouterOptions,
  ) {}

  route(request: RouteRequest): Lease {
    const { model, pool: pinned } = request;
    const live = this.directory.ready({ model: model.id });
    const routable = live.filter((r) => !this.ejected.has(r.id) && !request.exclude?.has(r.id));
    const pools = pinned ? [pinned] : this.options.poolOrder;

    if (pinned && !this.servedIn(model, pinned, live)) {
      const elsewhere = this.options.poolOrder.filter((p) => p !== pinned && this.servedIn(model, p, live));
      throw new ApiError(
        'model_not_found',
        `model ${model.id} is not served in pool ${pinned}` + (elsewhere.length ? `; it is served in ${elsewhere.join(', ')}` : ''),
        { param: 'model' },
      );
    }

    const quantization = request.quantization ?? this.defaultQuantization(model, routable, pools);
    const candidates = routable.filter((r) => r.quantization === quantization && pools.includes(r.pool));
    if (candidates.length === 0) throw this.unavailable(model, quantization, pinned, routable);

    const pool = pinned ?? this.healthiestPool(model, quantization, candidates);
    const inPool = candidates.filter((r) => r.pool === pool);
    const variant = `${model.id}|${quantization}|${pool}`;
    const perReplica = this.options.part?.(this.options.maxOutstandingPerReplica) ?? this.options.maxOutstandingPerReplica;
    const fleetSlots = inPool.length * this.options.maxOutstandingPerReplica;
    this.checkShare(request.tenant, variant, inPool.length * perReplica, () =>
      perReplica < this.options.maxOutstandingPerReplica
        ? `this control-plane process may send ${model.id} (${quantization}) in pool ${pool} (its part of ${fleetSlots})`
        : `${model.id} (${quantization}) in pool ${pool} can take`,
    );
    const replica = this.leastLoaded(inPool, perReplica);
    if (!replica) {
      throw new ApiError(
        'no_capacity',
        `every replica of ${model.id} (${quantization}) in pool ${pool} is at its limit of ${this.options.maxOutstandingPerReplica} requests in flight; retry with backoff`,
      );
    }
    return this.lease(replica, request.tenant, variant);
  }

  /** Refuses `tenant` one more of `variant`'s `slots` when it holds its share (see the top). */
  private checkShare(tenant: string, variant: string, slots: number, what: () => string): void {
    const held = this.holdings.get(variant);
    const mine = held?.byTenant.get(tenant) ?? 0;
    if (mine === 0) return; // anyone holding none may take a free slot
    const total = held!.total;
    let share = Math.max(1, Math.floor(slots * this.options.maxTenantShare));
    if (total >= slots * CONTENDED) share = Math.min(share, Math.max(1, Math.ceil(slots / held!.byTenant.size)));
    if (mine < share || share >= slots) return; // a share of every slot restricts nothing: no_capacity says it
    throw new ApiError(
      'rate_limited',
      `your organization holds ${mine} of the ${slots} requests in flight ${what()}, its share while ${held!.byTenant.size === 1 ? 'the rest is kept for others' : `${held!.byTenant.size} organizations share them`}; retry when one of yours finishes`,
      { headers: { 'retry-after': '1' } },
    );
  }

  /** Requests in flight per replica, for metrics and tests. */
  inFlight(replicaId: string): number {
    return this.outstanding.get(replicaId) ?? 0;
  }

  isEjected(replicaId: string): boolean {
    return this.ejected.has(replicaId);
  }

  /** Resolves once no request holds a replica (at once when none does). */
  idle(): Promise<void> {
    if (this.leased === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.add(resolve));
  }

  /** Requests holding a replica now, across every replica. */
  get leasedCount(): number {
    return this.leased;
  }

  /** Stops the probe timers (shutdown). */
  close(): void {
    for (const e of this.ejected.values()) clearTimeout(e.timer);
    this.ejected.clear();
    this.suspicions.clear();
  }

  private servedIn(model: CatalogModel, pool: Pool, live: readonly LiveReplica[]): boolean {
    return model.quantizations.some((q) => this.plan.desired(model.id, q, pool) > 0) || live.some((r) => r.pool === pool);
  }

  private defaultQuantization(model: CatalogModel, routable: readonly LiveReplica[], pools: readonly Pool[]): Quantization {
    const cheapest = this.options.byPrice(model);
    return (
      cheapest.find((q) => routable.some((r) => r.quantization === q && pools.includes(r.pool))) ??
      cheapest.find((q) => pools.some((p) => this.plan.desired(model.id, q, p) > 0)) ??
      cheapest[0]!
    );
  }

  private unavailable(model: CatalogModel, quantization: Quantization, pinned: Pool | undefined, routable: readonly LiveReplica[]): ApiError {
    const variant = `${model.id} (${quantization})`;
    if (!pinned) {
      return new ApiError('no_capacity', `no replica of ${variant} can take the request right now; retry with backoff`);
    }
    if (this.plan.desired(model.id, quantization, pinned) === 0) {
      return new ApiError('no_capacity', `pool ${pinned} runs no replica of ${variant}; try another quantization or pool`);
    }
    const healthy = this.options.poolOrder.filter((p) => p !== pinned && routable.some((r) => r.pool === p && r.quantization === quantization));
    const advice = healthy.length ? `retry with X-Service-Pool: ${healthy[0]}` : 'no other pool serves it right now; retry shortly';
    return new ApiError('pool_degraded', `pool ${pinned} is routing-degraded for ${variant}: no healthy replica; ${advice}`);
  }

  /** The pool where the largest share of the wanted replicas is routable; ties go by the configured order. */
  private healthiestPool(model: CatalogModel, quantization: Quantization, candidates: readonly LiveReplica[]): Pool {
    let best: Pool | undefined;
    let bestScore = -1;
    for (const pool of this.options.poolOrder) {
      const up = candidates.filter((r) => r.pool === pool).length;
      if (up === 0) continue;
      const score = up / Math.max(up, this.plan.desired(model.id, quantization, pool));
      if (score > bestScore) {
        best = pool;
        bestScore = score;
      }
    }
    return best!;
  }

  private leastLoaded(replicas: readonly LiveReplica[], perReplica: number): LiveReplica | undefined {
    let best: LiveReplica | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    // Start the scan at a moving offset so ties rotate instead of always taking the first.
    const start = this.turn++ % Math.max(1, replicas.length);
    for (let i = 0; i < replicas.length; i++) {
      const r = replicas[(start + i) % replicas.length]!;
      const load = this.outstanding.get(r.id) ?? 0;
      if (load < bestLoad && load < perReplica) {
        best = r;
        bestLoad = load;
      }
    }
    return best;
  }

  private lease(replica: LiveReplica, tenant: string, variant: string): Lease {
    this.outstanding.set(replica.id, (this.outstanding.get(replica.id) ?? 0) + 1);
    let held = this.holdings.get(variant);
    if (!held) this.holdings.set(variant, (held = { total: 0, byTenant: new Map() }));
    held.total++;
    held.byTenant.set(tenant, (held.byTenant.get(tenant) ?? 0) + 1);
    this.leased++;
    let released = false;
    return {
      replica,
      release: (outcome) => {
        if (released) return;
        released = true;
        const left = (this.outstanding.get(replica.id) ?? 1) - 1;
        if (left > 0) this.outstanding.set(replica.id, left);
        else this.outstanding.delete(replica.id);
        const mine = held.byTenant.get(tenant)! - 1;
        if (mine > 0) held.byTenant.set(tenant, mine);
        else held.byTenant.delete(tenant);
        if (--held.total === 0) this.holdings.delete(variant);
        if (--this.leased === 0) {
          for (const wake of this.idleWaiters) wake();
          this.idleWaiters.clear();
        }
        if (outcome === 'ok') this.suspicions.delete(replica.id);
        else if (outcome === 'failed') this.eject(replica, 1);
        else this.suspect(replica, tenant);
      },
    };
  }

  private suspect(replica: LiveReplica, tenant: string): void {
    if (this.ejected.has(replica.id)) return;
    let tenants = this.suspicions.get(replica.id);
    if (!tenants) this.suspicions.set(replica.id, (tenants = new Set()));
    tenants.add(tenant);
    if (tenants.size >= 2) {
      this.suspicions.delete(replica.id);
      this.eject(replica, 1);
      return;
    }
    if (this.probing.has(replica.id)) return;
    this.probing.add(replica.id);
    const judge = (healthy: boolean) => {
      this.probing.delete(replica.id);
      if (!healthy) this.eject(replica, 1);
    };
    this.options.probe(replica).then(judge, () => judge(false));
  }

  private eject(replica: LiveReplica, failures: number): void {
    if (this.ejected.has(replica.id) && failures === 1) return; // already out; its probe is scheduled
    const wait = Math.min(this.options.maxEjectMs, this.options.ejectMs * 2 ** (failures - 1));
    const timer = setTimeout(() => this.probeBack(replica, failures), wait);
    timer.unref();
    this.ejected.set(replica.id, { failures, timer });
    this.suspicions.delete(replica.id);
  }

  private probeBack(replica: LiveReplica, failures: number): void {
    const stillListed = this.directory.ready({ model: replica.model }).some((r) => r.id === replica.id);
    if (!stillListed) {
      // The agent no longer reports it healthy: the directory keeps it out from now on.
      this.ejected.delete(replica.id);
      return;
    }
    this.options.probe(replica).then(
      (healthy) => (healthy ? this.ejected.delete(replica.id) : this.eject(replica, failures + 1)),
      () => this.eject(replica, failures + 1),
    );
  }
}
