// Every control-plane setting, parsed once at start-up (see shared/src/config.ts).
// docs/configuration.md lists them; a test keeps the two in step.
import { Type } from '@sinclair/typebox';
import { loadConfig, setting, type ConfigOf } from '@svc/shared';

const Port = Type.Integer({ minimum: 0, maximum: 65535 });
const PositiveInt = Type.Integer({ minimum: 1 });

export const controlPlaneSettings = {
  dataDir: setting('SVC_DATA_DIR', Type.String({ minLength: 1 }), './data', 'Directory holding the SQLite database and other state.'),
  httpHost: setting('SVC_HTTP_HOST', Type.String({ minLength: 1 }), '127.0.0.1', 'Address the public HTTP API listens on.'),
  httpPort: setting('SVC_HTTP_PORT', Port, 8080, 'Port of the public HTTP API (0 picks a free port).'),
  grpcPort: setting('SVC_GRPC_PORT', Port, 7070, 'Port of the gRPC endpoint node agents dial.'),
  logLevel: setting(
    'SVC_LOG_LEVEL',
    Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
    'info',
    'Minimum level of the JSON logs written to stdout.',
  ),
  mode: setting(
    'SVC_MODE',
    Type.Union([Type.Literal('development'), Type.Literal('production')]),
    'development',
    'production tightens defaults meant for a laptop (e.g. webhook URLs to private addresses).',
  ),
  trustProxy: setting(
    'SVC_TRUST_PROXY',
    Type.Boolean(),
    false,
    'Take the client address from X-Forwarded-For (only behind a trusted load balancer).',
  ),
  bodyLimitBytes: setting('SVC_BODY_LIMIT_BYTES', PositiveInt, 8 * 1024 * 1024, 'Largest request body accepted, in bytes.'),
  rateLimitTier2: setting('SVC_RATE_LIMIT_TIER2', PositiveInt, 1200, 'Requests per minute per key for tier 2 organizations.'),
  rateLimitTier3: setting('SVC_RATE_LIMIT_TIER3', PositiveInt, 12000, 'Requests per minute per key for tier 3 organizations.'),
  idempotencyWindowSeconds: setting(
    'SVC_IDEMPOTENCY_WINDOW_SECONDS',
    PositiveInt,
    300,
    'How long a stored response is replayed for a repeated X-Service-Idempotency-Key.',
  ),
  idempotencyWaitSeconds: setting(
    'SVC_IDEMPOTENCY_WAIT_SECONDS',
    PositiveInt,
    30,
    'How long a duplicate waits for the first request with its idempotency key before 409 conflict.',
  ),
  keyCacheMs: setting(
    'SVC_KEY_CACHE_MS',
    Type.Integer({ minimum: 0, maximum: 5000 }),
    2000,
    'How long a verified key is cached; revocation by another process takes effect within this (spec: about 5 s).',
  ),
  modelCatalog: setting(
    'SVC_MODEL_CATALOG',
    Type.String(),
    '',
    'Path of the model catalog JSON file; empty means the catalog shipped in control-plane/catalog/models.json.',
  ),
  publicBaseUrl: setting(
    'SVC_PUBLIC_BASE_URL',
    Type.String(),
    '',
    'Base URL users reach the API at, used in docs and hints; empty means http://<httpHost>:<httpPort>.',
  ),
};

export type ControlPlaneConfig = ConfigOf<typeof controlPlaneSettings>;

export function loadControlPlaneConfig(env: Record<string, string | undefined> = process.env): ControlPlaneConfig {
  return loadConfig(controlPlaneSettings, { env, file: env.SVC_CONFIG_FILE || undefined });
}

/** A config with every default, for tests and tools that override a few settings. */
export function defaultControlPlaneConfig(overrides: Partial<ControlPlaneConfig> = {}): ControlPlaneConfig {
  return { ...loadConfig(controlPlaneSettings, { env: {} }), ...overrides };
}
