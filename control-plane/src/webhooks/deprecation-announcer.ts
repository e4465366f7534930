// Announces model deprecations from the catalog as `model.deprecation_announced`
// events, once each: the store remembers (model, shutdown date) pairs, so a restart
// does not announce again, while a moved shutdown date is news and is announced.
// A deprecation is announced when its `announced_at` has come (the catalog may list one
// ahead of time). The events have no org: every org's subscriptions may receive them.
import { newId, type Clock } from '@svc/shared';
import type { CatalogModel } from '../models/catalog.js';
import type { Store } from '../store/store.js';
import { MODEL_DEPRECATION_ANNOUNCED } from './event-types.js';

export interface DeprecationNotice {
  modelId: string;
  announcedAt: string;
  shutdownAt: string;
  replacement: string;
}

export const announcementKey = (modelId: string, shutdownAt: string): string => `${modelId} ${shutdownAt}`;

/** Deprecations whose announcement time has come and that were not announced yet. */
export function deprecationsDue(models: readonly CatalogModel[], announced: ReadonlySet<string>, now: number): DeprecationNotice[] {
  return models.flatMap((m) => {
    const d = m.deprecation;
    if (!d || Date.parse(d.announced_at) > now || announced.has(announcementKey(m.id, d.shutdown_at))) return [];
    return [{ modelId: m.id, announcedAt: d.announced_at, shutdownAt: d.shutdown_at, replacement: d.replacement }];
  });
}

export class DeprecationAnnouncer {
  /** Known-announced keys, so a poll touches the store only when something is due. */
  private announced: Set<string> | undefined;

  constructor(
    private readonly store: Store,
    private readonly models: readonly CatalogModel[],
    private readonly clock: Clock,
  ) {}

  /** Appends the events that are due; returns the models announced now. */
  async announceDue(): Promise<string[]> {
    this.announced ??= await this.store.webhooks.announcedDeprecations();
    const now = this.clock.now();
    const appended: string[] = [];
    for (const notice of deprecationsDue(this.models, this.announced, now)) {
      const event = {
        id: newId('evt'),
        type: MODEL_DEPRECATION_ANNOUNCED,
        orgId: null,
        subject: notice.modelId,
        data: {
          model_id: notice.modelId,
          announced_at: notice.announcedAt,
          shutdown_at: notice.shutdownAt,
          replacement: notice.replacement,
        },
        createdAt: now,
      };
      if (await this.store.webhooks.announceDeprecation(notice.modelId, notice.shutdownAt, event)) appended.push(notice.modelId);
      this.announced.add(announcementKey(notice.modelId, notice.shutdownAt));
    }
    return appended;
  }
}
