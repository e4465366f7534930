// Configuration is parsed once, at start-up, by one schema: every setting has an
// environment variable, a default and a one-line description. Values come from the
// defaults, then an optional JSON config file, then the environment. An invalid value
// stops start-up with a message naming the setting, not the 1,000th request.
import { readFileSync } from 'node:fs';
import { Kind, type Static, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { ConfigError } from './errors.js';

export interface Setting<T extends TSchema = TSchema> {
  env: string;
  schema: T;
  default: Static<T>;
  description: string;
  /** Secrets are shown as `[redacted]` by describeConfig. */
  secret?: boolean;
}

export type SettingsSpec = Record<string, Setting>;
export type ConfigOf<S extends SettingsSpec> = { [K in keyof S]: Static<S[K]['schema']> };

export function setting<T extends TSchema>(
  env: string,
  schema: T,
  defaultValue: Static<T>,
  description: string,
  options: { secret?: boolean } = {},
): Setting<T> {
  return { env, schema, default: defaultValue, description, ...options };
}

export interface LoadConfigOptions {
  env?: Record<string, string | undefined>;
  /** Path of a JSON file whose keys are setting names (camelCase). */
  file?: string | undefined;
}

/** Turns an environment string into the schema's type; leaves it alone when it can't. */
function fromEnvString(schema: TSchema, raw: string): unknown {
  const kind = schema[Kind] as string;
  if (kind === 'Integer' || kind === 'Number') {
    return raw.trim() !== '' && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  }
  if (kind === 'Boolean') {
    if (/^(true|1|yes|on)$/i.test(raw)) return true;
    if (/^(false|0|no|off)$/i.test(raw)) return false;
    return raw;
  }
  if (kind === 'Array') return raw.split(',').map((s) => s.trim()).filter(Boolean);
  return raw;
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new Error('the top level must be an object of settings');
    }
    return parsed as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid: ${(err as Error).message}`);
  }
}

function describeValue(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(JSON.stringify(value));
}

export function loadConfig<S extends SettingsSpec>(spec: S, options: LoadConfigOptions = {}): ConfigOf<S> {
  const env = options.env ?? process.env;
  const fileValues = options.file ? readConfigFile(options.file) : {};
  for (const name of Object.keys(fileValues)) {
    if (!(name in spec)) {
      const known = Object.keys(spec).join(', ');
      throw new ConfigError(`unknown setting "${name}" in config file ${options.file}; known settings: ${known}`);
    }
  }

  const config: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(spec)) {
    let value: unknown = def.default;
    let source = 'default';
    if (name in fileValues) {
      value = fileValues[name];
      source = `config file ${options.file}`;
    }
    const raw = env[def.env];
    if (raw !== undefined && raw !== '') {
      value = fromEnvString(def.schema, raw);
      source = 'environment';
    }
    if (!Value.Check(def.schema, value)) {
      const first = Value.Errors(def.schema, value).First();
      const why = first ? `${first.path ? `${first.path}: ` : ''}${first.message}` : 'invalid value';
      throw new ConfigError(
        `invalid setting ${def.env} (${name}, from ${source}): ${why}; got ${describeValue(value)}. ${def.description}`,
      );
    }
    config[name] = value;
  }
  return config as ConfigOf<S>;
}

/** One line per setting for docs and `--help` output. */
export function describeConfig(spec: SettingsSpec): Array<{ name: string; env: string; default: string; description: string }> {
  return Object.entries(spec).map(([name, def]) => ({
    name,
    env: def.env,
    default: def.secret ? '[redacted]' : JSON.stringify(def.default),
    description: def.description,
  }));
}

/**
 * Checks a parsed JSON document (a catalog, a state file) against its schema; the error
 * names the document and the path of the first problem.
 */
export function parseWithSchema<T extends TSchema>(schema: T, value: unknown, what: string): Static<T> {
  if (!Value.Check(schema, value)) {
    const first = Value.Errors(schema, value).First();
    throw new Error(`${what} is invalid at ${first?.path || '/'}: ${first?.message ?? 'unknown error'}`);
  }
  return value;
}
