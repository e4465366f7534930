// Reads of the model catalog as an org sees it: only models it may call, with the pools
// that currently have live capacity for each.
import { ApiError, toUnixSeconds, type Clock } from '@svc/shared';
import type { OrgRecord } from '../store/records.js';
import type { Catalog, CatalogModel, Pool, RateCard } from './catalog.js';

/**
 * Which pools have live, healthy replicas of a model. The replica directory
 * (replicas/replica-directory.ts) answers from what agents report; without replicas no
 * pool has capacity, and the API says so with `pools: []` rather than a made-up value.
 */
export interface LiveCapacity {
  poolsServing(modelId: string): Pool[];
}

export interface ModelView {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  family: string;
  context_window: number;
  quantizations: string[];
  pools: Pool[];
  modalities: string[];
  rate_card_id: string;
  dimensions?: number;
  deprecation: { announced_at: string; shutdown_at: string; replacement: string; notice: string } | null;
}

export class ModelService {
  private readonly byId: Map<string, CatalogModel>;
  private readonly cards: Map<string, RateCard>;

  constructor(
    readonly catalog: Catalog,
    private readonly capacity: LiveCapacity,
    private readonly clock: Clock,
  ) {
    this.byId = new Map(catalog.models.map((m) => [m.id, m]));
    this.cards = new Map(catalog.rate_cards.map((c) => [c.id, c]));
  }

  /** Whether `org` may call `model` now: allowed for the org and not past shutdown. */
  mayCall(org: OrgRecord, model: CatalogModel): boolean {
    if (org.allowedModels !== null && !org.allowedModels.includes(model.id)) return false;
    if (model.deprecation && Date.parse(model.deprecation.shutdown_at) <= this.clock.now()) return false;
    return true;
  }

  list(org: OrgRecord, filter: { pool?: Pool; family?: string }): ModelView[] {
    return this.catalog.models
      .filter((m) => this.mayCall(org, m))
      .filter((m) => filter.family === undefined || m.family === filter.family)
      .map((m) => this.view(m))
      .filter((v) => filter.pool === undefined || v.pools.includes(filter.pool));
  }

  get(org: OrgRecord, modelId: string): ModelView {
    return this.view(this.callable(org, modelId, 'model_id'));
  }

  /** The catalog entry of a model `org` may call now; 404 `model_not_found` naming `param` otherwise. */
  callable(org: OrgRecord, modelId: string, param = 'model'): CatalogModel {
    const model = this.byId.get(modelId);
    if (!model || !this.mayCall(org, model)) {
      throw new ApiError('model_not_found', `model "${modelId}" does not exist or your organization may not call it`, { param });
    }
    return model;
  }

  rateCard(model: CatalogModel): RateCard | undefined {
    return this.cards.get(model.rate_card_id);
  }

  private view(m: CatalogModel): ModelView {
    const view: ModelView = {
      id: m.id,
      object: 'model',
      created: m.created,
      owned_by: m.owned_by,
      family: m.family,
      context_window: m.context_window,
      quantizations: [...m.quantizations],
      pools: this.capacity.poolsServing(m.id),
      modalities: ['text-in', 'text-out'],
      rate_card_id: m.rate_card_id,
      deprecation: m.deprecation
        ? {
            ...m.deprecation,
            notice: `${m.id} shuts down at ${m.deprecation.shutdown_at}; migrate to ${m.deprecation.replacement}.`,
          }
        : null,
    };
    if (m.dimensions !== undefined) view.dimensions = m.dimensions;
    return view;
  }
}

/** RFC 9745 `Deprecation` and RFC 8594 `Sunset` headers for a scheduled shutdown. */
export function deprecationHeaders(view: ModelView): Record<string, string> {
  if (!view.deprecation) return {};
  return {
    deprecation: `@${toUnixSeconds(Date.parse(view.deprecation.announced_at))}`,
    sunset: new Date(view.deprecation.shutdown_at).toUTCString(),
    link: `</v1/models/${encodeURIComponent(view.deprecation.replacement)}>; rel="successor-version"`,
  };
}
