// Desired replicas: how many model-server replicas of (model, quantization) each pool
// should run, from configuration (SVC_REPLICAS or the config file's `replicas`). Parsed
// and checked against the catalog once at start-up: a typo stops the control plane with
// a message naming the setting, not a reconciler that silently places nothing.
import { Type, type Static } from '@sinclair/typebox';
import { ConfigError } from '@svc/shared';
import { POOLS, QUANTIZATIONS, type Catalog, type Pool, type Quantization } from '../models/catalog.js';

export const MAX_REPLICAS_PER_TARGET = 64;

export const DesiredReplicaSchema = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    quantization: Type.Union(QUANTIZATIONS.map((q) => Type.Literal(q))),
    pool: Type.Union(POOLS.map((p) => Type.Literal(p))),
    count: Type.Integer({ minimum: 0, maximum: MAX_REPLICAS_PER_TARGET }),
  },
  { additionalProperties: false },
);
export type DesiredReplica = Static<typeof DesiredReplicaSchema>;

/**
 * The setting's schema: the compact string `model:quantization:pool=count,...` (also
 * `none`), or in the config file a list of {model, quantization, pool, count}.
 */
export const ReplicasSettingSchema = Type.Union([Type.String(), Type.Array(DesiredReplicaSchema)]);
export type ReplicasSetting = Static<typeof ReplicasSettingSchema>;

export const REPLICAS_ENV = 'SVC_REPLICAS';
/** No replicas at all (an empty environment variable means "not set", so it cannot say this). */
export const NO_REPLICAS = 'none';

const problem = (message: string): ConfigError => new ConfigError(`invalid setting ${REPLICAS_ENV} (replicas): ${message}`);

/** `tiny-chat:int4:na=1` -> {model, quantization, pool, count}; model ids may contain ':', so parts are taken from the right. */
export function parseReplicaEntry(entry: string): { model: string; quantization: string; pool: string; count: string } | undefined {
  const eq = entry.lastIndexOf('=');
  if (eq === -1) return undefined;
  const parts = entry.slice(0, eq).split(':');
  if (parts.length < 3) return undefined;
  const pool = parts.pop()!;
  const quantization = parts.pop()!;
  return { model: parts.join(':'), quantization, pool, count: entry.slice(eq + 1) };
}

function fromString(text: string): Array<{ model: string; quantization: string; pool: string; count: unknown; source: string }> {
  if (text.trim() === NO_REPLICAS) return [];
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const parts = parseReplicaEntry(entry);
      if (!parts) throw problem(`"${entry}" is not model:quantization:pool=count (e.g. tiny-chat:int4:na=1)`);
      const count = /^\d+$/.test(parts.count) ? Number(parts.count) : parts.count;
      return { ...parts, count, source: `"${entry}"` };
    });
}

/** Parses the setting and checks every entry against the catalog. Throws ConfigError. */
export function resolveDesiredReplicas(setting: ReplicasSetting, catalog: Catalog): DesiredReplica[] {
  const entries =
    typeof setting === 'string'
      ? fromString(setting)
      : setting.map((e, i) => ({ ...e, source: `entry ${i} (${e.model}:${e.quantization}:${e.pool})` }));
  const models = new Map(catalog.models.map((m) => [m.id, m]));
  const seen = new Set<string>();
  const out: DesiredReplica[] = [];
  for (const e of entries) {
    const model = models.get(e.model);
    if (!model) throw problem(`${e.source}: unknown model "${e.model}"; the catalog has ${[...models.keys()].join(', ')}`);
    if (!(model.quantizations as string[]).includes(e.quantization)) {
      throw problem(`${e.source}: model ${model.id} has no ${e.quantization} variant; it has ${model.quantizations.join(', ')}`);
    }
    if (!(POOLS as readonly string[]).includes(e.pool)) throw problem(`${e.source}: unknown pool "${e.pool}"; pools are ${POOLS.join(', ')}`);
    if (typeof e.count !== 'number' || !Number.isInteger(e.count) || e.count < 0 || e.count > MAX_REPLICAS_PER_TARGET) {
      throw problem(`${e.source}: count must be a whole number from 0 to ${MAX_REPLICAS_PER_TARGET}`);
    }
    const key = targetKey(e.model, e.quantization, e.pool);
    if (seen.has(key)) throw problem(`${e.source}: ${e.model}:${e.quantization}:${e.pool} is listed twice`);
    seen.add(key);
    out.push({ model: model.id, quantization: e.quantization as Quantization, pool: e.pool as Pool, count: e.count });
  }
  return out;
}

/** One string per (model, quantization, pool): what the reconciler groups replicas by. */
export function targetKey(model: string, quantization: string, pool: string): string {
  return `${model}:${quantization}:${pool}`;
}
