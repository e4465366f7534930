// The delivery worker: turns events into deliveries (the outbox fan-out) and sends the
// deliveries that are due, recording every attempt. It polls the store, and an event
// appended in this process wakes it at once. At-least-once: a delivery stays pending
// until an attempt is recorded, so a crash mid-send means it is sent again after restart.
import { setMaxListeners } from 'node:events';
import { newId, toUnixSeconds, type Clock } from '@svc/shared';
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../store/store.js';
import { orderingKey, pickSendable, planFanOut } from './fan-out.js';
import type { AttemptSender } from './http-sender.js';
import { decideAfterAttempt, describeOutcome, type AttemptDecision } from './retry-schedule.js';
import { signedHeaders } from './signing.js';
import type { AttemptResult, DueDelivery } from './webhook-store.js';

/** Events fanned out per transaction. */
const FAN_OUT_BATCH = 200;
/** How long a stop waits for attempts in flight before aborting them. */
const STOP_GRACE_MS = 2_000;
/** Attempts in flight at once, across all endpoints... */
const MAX_IN_FLIGHT = 16;
/** ...and for one organization's endpoints. */
const MAX_IN_FLIGHT_PER_ORG = 4;
/** Due deliveries read per query beyond what can start: room to find other orgs' among one org's. */
const DUE_LOOKAHEAD = 256;
/**
 * A delivery whose attempt failed unexpectedly (not an endpoint failure: e.g. the store
 * refused the record) waits this long, so a persistent fault does not resend every poll.
 */
const UNEXPECTED_FAILURE_PAUSE_MS = 30_000;

export interface DeliveryWorkerOptions {
  store: Store;
  clock: Clock;
  send: AttemptSender;
  /** Waits in milliseconds (see retry-schedule.ts). */
  schedule: readonly number[];
  timeoutMs: number;
  pollMs: number;
  log: FastifyBaseLogger;
  /** Also run on each pass (the deprecation announcer); failures are logged. */
  onPoll?: () => Promise<void>;
  /** Told each recorded attempt's outcome (the metrics' delivery counter). */
  onAttempt?: (outcome: AttemptDecision['kind']) => void;
}

/** The body a receiver gets: the event as the API shows it. */
export function deliveryBody(event: DueDelivery['event']): string {
  return JSON.stringify({ id: event.id, type: event.type, created: toUnixSeconds(event.createdAt), data: event.data });
}

export class DeliveryWorker {
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly inFlightChains = new Set<string>();
  private readonly inFlightByOrg = new Map<string, number>();
  /** Delivery id -> clock time before which it is not tried (after an unexpected failure). */
  private readonly paused = new Map<string, number>();
  private abort = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private ticking: Promise<void> | undefined;
  private again = false;
  /** Events were fanned out since the last look behind the due page (see mayLookBehind). */
  private newEvents = false;
  private lookedBehindAt = -Infinity;
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly options: DeliveryWorkerOptions) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.abort = new AbortController();
    // Every attempt in flight listens on this one shutdown signal: bounded by MAX_IN_FLIGHT, not a leak.
    setMaxListeners(MAX_IN_FLIGHT + 4, this.abort.signal);
    this.unsubscribe = this.options.store.events.onAppend(() => this.nudge());
    this.nudge();
  }

  /**
   * Stops polling, lets attempts in flight finish for up to `graceMs` (a receiver that
   * already has the request should not get it twice after a clean restart), then aborts
   * the rest: they stay pending and go out after the next start.
   */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    clearTimeout(this.timer);
    await this.ticking;
    const settled = Promise.allSettled(this.inFlight.values());
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    this.abort.abort();
    await settled;
  }

  /** Runs a pass soon (coalesced with one already running). */
  nudge(): void {
    if (!this.running) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.ticking = this.tick()
      .catch((err: unknown) => this.options.log.error({ err }, 'webhook worker pass failed'))
      .finally(() => {
        this.ticking = undefined;
        if (!this.running) return;
        if (this.again) {
          this.again = false;
          this.nudge();
        } else {
          this.timer = setTimeout(() => this.nudge(), this.options.pollMs);
        }
      });
  }

  /** One pass: fan out new events, then start the attempts that are due. */
  private async tick(): Promise<void> {
    const { store, clock } = this.options;
    // Its failure must not hold up deliveries: logged, and tried again on the next pass.
    await this.options.onPoll?.().catch((err: unknown) => this.options.log.error({ err }, 'webhook worker poll hook failed'));
    const firstDelayMs = this.options.schedule[0] ?? 0;
    let consumed: number;
    do {
      consumed = await store.webhooks.fanOut(FAN_OUT_BATCH, (events, subscriptions) =>
        planFanOut(events, subscriptions, { now: clock.now(), firstDelayMs, newId: () => newId('dlv') }),
      );
      if (consumed > 0) this.newEvents = true;
    } while (consumed === FAN_OUT_BATCH);
    const capacity = MAX_IN_FLIGHT - this.inFlight.size;
    if (capacity <= 0) return;
    const now = clock.now();
    for (const [id, until] of this.paused) if (until <= now) this.paused.delete(id);
    const held = new Set([...this.inFlight.keys(), ...this.paused.keys()]);
    // Ask for more than the capacity: some heads are held or share a chain.
    const limit = capacity + held.size + DUE_LOOKAHEAD;
    const due = await store.webhooks.dueDeliveries(now, limit);
    let candidates = due;
    if (due.length === limit && this.mayLookBehind()) {
      // The page (oldest first) may be a few orgs' backlog: find the orgs with nothing in
      // flight whose deliveries are behind it, so pickSendable can give them their turn.
      const seen = new Set([...due.map((d) => d.subscription.orgId), ...this.inFlightByOrg.keys()]);
      candidates = [...due, ...(await store.webhooks.dueDeliveries(now, limit, [...seen]))];
    }
    const picked = pickSendable(candidates, { ids: held, chains: this.inFlightChains, byOrg: this.inFlightByOrg }, capacity, MAX_IN_FLIGHT_PER_ORG);
    for (const item of picked) this.launch(item);
    if (picked.length === capacity || due.length < limit) return;
    // Slots left over: look past the orgs already at their share, so the deliveries of orgs
    // with something (but not their share) in flight are found behind them.
    const full = [...this.inFlightByOrg].filter(([, n]) => n >= MAX_IN_FLIGHT_PER_ORG).map(([org]) => org);
    if (full.length === 0) return;
    const behind = await store.webhooks.dueDeliveries(now, limit, full);
    const ids = new Set([...held, ...this.inFlight.keys()]);
    for (const item of pickSendable(behind, { ids, chains: this.inFlightChains, byOrg: this.inFlightByOrg }, capacity - picked.length, MAX_IN_FLIGHT_PER_ORG)) this.launch(item);
  }

  /**
   * Whether to look behind a full page of due deliveries now: after new events were
   * fanned out (they may be an idle org's), else at most once per poll interval (the
   * look scans past the backlog, which costs the database the more, the bigger it is).
   */
  private mayLookBehind(): boolean {
    const at = performance.now();
    if (!this.newEvents && at - this.lookedBehindAt < this.options.pollMs) return false;
    this.newEvents = false;
    this.lookedBehindAt = at;
    return true;
  }

  private launch(item: DueDelivery): void {
    const id = item.delivery.id;
    const chain = orderingKey(item.delivery);
    if (chain !== null) this.inFlightChains.add(chain);
    const org = item.subscription.orgId;
    this.inFlightByOrg.set(org, (this.inFlightByOrg.get(org) ?? 0) + 1);
    const attempt = this.attempt(item)
      .catch((err: unknown) => {
        // The delivery stays pending and is tried again after a pause.
        this.paused.set(id, this.options.clock.now() + UNEXPECTED_FAILURE_PAUSE_MS);
        this.options.log.error({ err, delivery: id }, 'webhook attempt failed unexpectedly');
      })
      .finally(() => {
        this.inFlight.delete(id);
        if (chain !== null) this.inFlightChains.delete(chain);
        const left = (this.inFlightByOrg.get(org) ?? 1) - 1;
        if (left > 0) this.inFlightByOrg.set(org, left);
        else this.inFlightByOrg.delete(org);
        // The outcome may unblock the next event of the chain, or free capacity.
        this.nudge();
      });
    this.inFlight.set(id, attempt);
  }

  private async attempt({ delivery, subscription, event }: DueDelivery): Promise<void> {
    const { store, clock, log } = this.options;
    const startedAt = clock.now();
    const secrets = (await store.webhooks.activeSecrets(subscription.id, startedAt)).map((s) => s.secret);
    const body = deliveryBody(event);
    // webhook-id is the event id: the same on every attempt and every redelivery, for deduplication.
    const headers = signedHeaders(secrets, event.id, toUnixSeconds(startedAt), body);
    let outcome;
    try {
      outcome = await this.options.send({
        url: subscription.url,
        headers: { ...headers },
        body,
        timeoutMs: this.options.timeoutMs,
        signal: this.abort.signal,
      });
    } catch (err) {
      if (this.abort.signal.aborted) return; // shutting down: the delivery stays pending
      throw err;
    }
    const now = clock.now();
    const decision = decideAfterAttempt({
      outcome,
      failedBefore: delivery.failedInRun,
      schedule: this.options.schedule,
      now,
      random: Math.random(),
    });
    const result = attemptResult(decision, delivery.failedInRun);
    await store.webhooks.recordAttempt(
      {
        deliveryId: delivery.id,
        attempt: delivery.attemptCount + 1,
        startedAt,
        durationMs: outcome.durationMs,
        statusCode: outcome.statusCode,
        error: outcome.error,
        nextAttemptAt: result.nextAttemptAt,
      },
      result,
    );
    this.options.onAttempt?.(decision.kind);
    const fields = { delivery: delivery.id, webhook: subscription.id, event: event.id, outcome: describeOutcome(outcome) };
    if (decision.kind === 'retry') log.info({ ...fields, next_attempt_at: new Date(decision.at).toISOString() }, 'webhook attempt failed');
    else if (decision.kind === 'give_up') log.warn({ ...fields, reason: decision.reason }, 'webhook delivery given up');
    else if (decision.kind === 'disable') log.warn({ ...fields, reason: decision.reason }, 'webhook subscription disabled');
  }
}

/** How a decision leaves the delivery row. */
export function attemptResult(decision: AttemptDecision, failedBefore: number): AttemptResult {
  switch (decision.kind) {
    case 'succeeded':
      return { status: 'succeeded', failedInRun: failedBefore, nextAttemptAt: null };
    case 'retry':
      return { status: 'pending', failedInRun: failedBefore + 1, nextAttemptAt: decision.at };
    case 'give_up':
      return { status: 'failed', failedInRun: failedBefore + 1, nextAttemptAt: null };
    case 'disable':
      return { status: 'failed', failedInRun: failedBefore + 1, nextAttemptAt: null, disableReason: decision.reason };
  }
}
