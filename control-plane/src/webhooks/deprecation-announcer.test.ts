import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../models/catalog.js';
import { announcementKey, deprecationsDue } from './deprecation-announcer.js';

const model = (id: string, deprecation?: CatalogModel['deprecation']): CatalogModel => ({
  id,
  kind: 'chat',
  created: 0,
  owned_by: 'x',
  family: 'x',
  context_window: 1,
  quantizations: ['fp16'],
  rate_card_id: 'rc',
  serving: { engine: 'cpu', image: 'example/engine:1', gpus: 0, weights: { fp16: { path: '/m.gguf' } } },
  ...(deprecation ? { deprecation } : {}),
});

const now = Date.parse('2026-11-22T00:00:00Z');
const old = model('old-model', { announced_at: '2026-11-01T00:00:00Z', shutdown_at: '2027-01-30T00:00:00Z', replacement: 'new-model' });
const later = model('later-model', { announced_at: '2026-12-01T00:00:00Z', shutdown_at: '2027-03-01T00:00:00Z', replacement: 'new-model' });

describe('deprecationsDue', () => {
  it('lists deprecations whose announcement time has come, once', () => {
    expect(deprecationsDue([old, later, model('new-model')], new Set(), now)).toEqual([
      { modelId: 'old-model', announcedAt: '2026-11-01T00:00:00Z', shutdownAt: '2027-01-30T00:00:00Z', replacement: 'new-model' },
    ]);
    expect(deprecationsDue([old], new Set([announcementKey('old-model', '2027-01-30T00:00:00Z')]), now)).toEqual([]);
  });

  it('announces a deprecation listed ahead of time when its day comes', () => {
    expect(deprecationsDue([later], new Set(), Date.parse('2026-12-01T00:00:00Z')).map((d) => d.modelId)).toEqual(['later-model']);
  });

  it('announces again when the shutdown date moves', () => {
    const announced = new Set([announcementKey('old-model', '2027-01-01T00:00:00Z')]);
    expect(deprecationsDue([old], announced, now).map((d) => d.shutdownAt)).toEqual(['2027-01-30T00:00:00Z']);
  });
});
