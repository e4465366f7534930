// Every control-plane setting, parsed once at start-up (see shared/src/config.ts).
// docs/configuration.md lists them; a test keeps the two in step.
import { Type } from '@sinclair/typebox';
import { ConfigError, LOG_FORMATS, loadConfig, setting, type ConfigOf } from '@svc/shared';
import { parseActionOverrides } from './remediation/remediation-policy.js';
import { DEFAULT_RETRY_SCHEDULE, DURATION_PATTERN } from './webhooks/retry-schedule.js';
import { ReplicasSettingSchema } from './replicas/desired.js';
import { trustedProxies } from './http/trusted-proxies.js';

const Port = Type.Integer({ minimum: 0, maximum: 65535 });
const PositiveInt = Type.Integer({ minimum: 1 });

export const controlPlaneSettings = {
  dataDir: setting('SVC_DATA_DIR', Type.String({ minLength: 1 }), './data', 'Directory holding the SQLite database and other state.'),
  databaseUrl: setting(
    'SVC_DATABASE_URL',
    Type.Union([Type.Literal(''), Type.String({ pattern: '^postgres(ql)?://' })]),
    '',
    'PostgreSQL connection URL (postgres://user:password@host:5432/db); set, the control plane keeps its state there and several replicas may share it. Empty: SQLite under SVC_DATA_DIR.',
    { secret: true },
  ),
  databasePoolSize: setting(
    'SVC_DATABASE_POOL_SIZE',
    Type.Integer({ minimum: 1, maximum: 1000 }),
    10,
    'Most PostgreSQL connections one control-plane process opens (plus one for event notifications); replicas x this must stay under the server max_connections.',
  ),
  workers: setting(
    'SVC_WORKERS',
    Type.String({ pattern: '^(auto|[1-9][0-9]{0,3})$' }),
    '1',
    'Control-plane processes on this machine sharing its ports (auto: one per core); a primary restarts any that dies. Needs PostgreSQL (SVC_DATABASE_URL): on SQLite it stays 1.',
  ),
  httpHost: setting('SVC_HTTP_HOST', Type.String({ minLength: 1 }), '127.0.0.1', 'Address the public HTTP API listens on.'),
  httpPort: setting('SVC_HTTP_PORT', Port, 8080, 'Port of the public HTTP API (0 picks a free port).'),
  grpcPort: setting('SVC_GRPC_PORT', Port, 7070, 'Port of the gRPC endpoint node agents dial.'),
  operatorMetricsPort: setting(
    'SVC_OPERATOR_METRICS_PORT',
    Port,
    0,
    "Port of the operators' listener (GET /metrics with dcgm-exporter series, GET /status the fleet status page; no authentication); 0 leaves it off.",
  ),
  operatorMetricsHost: setting(
    'SVC_OPERATOR_METRICS_HOST',
    Type.String({ minLength: 1 }),
    '127.0.0.1',
    "Address the operators' listener (metrics and status page) binds; keep it on loopback or a management network, never the public one.",
  ),
  operatorHostnames: setting(
    'SVC_OPERATOR_HOSTNAMES',
    Type.Array(Type.String({ minLength: 1 })),
    [],
    "Host names (comma-separated) a browser may use to open the operators' status page besides IP addresses and localhost; any other Host header is refused, so a hostile web page cannot reach the listener through DNS rebinding.",
  ),
  operatorStatusRefreshMs: setting(
    'SVC_OPERATOR_STATUS_REFRESH_MS',
    Type.Integer({ minimum: 250, maximum: 60_000 }),
    2000,
    "How often the operators' status page fetches the fleet again; the listener reads the store at most once per half of this, however many pages are open.",
  ),
  statusCacheMs: setting(
    'SVC_STATUS_CACHE_MS',
    Type.Integer({ minimum: 100, maximum: 600_000 }),
    5000,
    'How long the public status page (GET /status, /status/{pool}, /status.json) reuses one read of the fleet; any request rate costs one store read per period.',
  ),
  grpcHost: setting(
    'SVC_GRPC_HOST',
    Type.String({ minLength: 1 }),
    '127.0.0.1',
    'Address the agent gRPC endpoint listens on; anything but loopback requires TLS (SVC_GRPC_TLS_CERT/KEY).',
  ),
  grpcTlsCert: setting('SVC_GRPC_TLS_CERT', Type.String(), '', 'PEM certificate (chain) of the agent gRPC endpoint; empty means plaintext (loopback only).'),
  grpcTlsKey: setting('SVC_GRPC_TLS_KEY', Type.String(), '', 'PEM private key of SVC_GRPC_TLS_CERT.'),
  grpcTlsCa: setting('SVC_GRPC_TLS_CA', Type.String(), '', 'PEM CA bundle that signs agent client certificates (needed for mutual TLS).'),
  grpcMutualTls: setting(
    'SVC_GRPC_MUTUAL_TLS',
    Type.Boolean(),
    false,
    'Require agents to present a client certificate signed by SVC_GRPC_TLS_CA.',
  ),
  grpcKeepaliveMs: setting(
    'SVC_GRPC_KEEPALIVE_MS',
    Type.Integer({ minimum: 1000 }),
    5000,
    'How often the control plane pings each agent connection (HTTP/2 PING), so a connection that died silently (partition, host crash) is noticed within seconds.',
  ),
  grpcKeepaliveTimeoutMs: setting(
    'SVC_GRPC_KEEPALIVE_TIMEOUT_MS',
    Type.Integer({ minimum: 500 }),
    3000,
    'A ping unanswered this long closes the agent connection: its session ends and commands wait for the agent to reconnect.',
  ),
  grpcMaxMessageBytes: setting(
    'SVC_GRPC_MAX_MESSAGE_BYTES',
    Type.Integer({ minimum: 65_536, maximum: 1_073_741_824 }),
    4_194_304,
    'Largest gRPC message the control plane accepts from or sends to an agent; a larger one fails that call.',
  ),
  reportIntervalMs: setting(
    'SVC_REPORT_INTERVAL_MS',
    Type.Integer({ minimum: 100, maximum: 600_000 }),
    5000,
    'How often agents send heartbeats and GPU telemetry (told to them in Welcome / ReportInterval).',
  ),
  nodeDeadlineMs: setting(
    'SVC_NODE_DEADLINE_MS',
    Type.Integer({ minimum: 0 }),
    0,
    'A node with no message for this long becomes unreachable; 0 means 3 report intervals. Must exceed the report interval.',
  ),
  telemetryFlushMs: setting(
    'SVC_TELEMETRY_FLUSH_MS',
    Type.Integer({ minimum: 0 }),
    0,
    'How often buffered telemetry and last-seen times are written to the store in one transaction; 0 means every report interval.',
  ),
  nodeTokenTtlSeconds: setting(
    'SVC_NODE_TOKEN_TTL_SECONDS',
    PositiveInt,
    86_400,
    'Default lifetime of a node enrollment token (svcctl nodes token create --ttl overrides it).',
  ),
  logLevel: setting(
    'SVC_LOG_LEVEL',
    Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
    'info',
    'Minimum level of the logs written to stdout.',
  ),
  logFormat: setting(
    'SVC_LOG_FORMAT',
    Type.Union(LOG_FORMATS.map((f) => Type.Literal(f))),
    'auto',
    'Log format: pretty (pino-pretty, for people), json (one object per line, for collectors), or auto: pretty when stdout (svcctl: stderr) is a terminal, json otherwise.',
  ),
  mode: setting(
    'SVC_MODE',
    Type.Union([Type.Literal('development'), Type.Literal('production')]),
    'development',
    'production tightens defaults meant for a laptop (e.g. webhook URLs must use https; development also allows plain http).',
  ),
  trustProxy: setting(
    'SVC_TRUST_PROXY',
    Type.Array(Type.String({ minLength: 1 })),
    [],
    'CIDRs of the load balancers in front (comma-separated; loopback, linklocal, uniquelocal also work); the source address is the right-most X-Forwarded-For hop not in them. Empty: the socket address.',
  ),
  bodyLimitBytes: setting('SVC_BODY_LIMIT_BYTES', PositiveInt, 8 * 1024 * 1024, 'Largest request body accepted, in bytes.'),
  rateLimitTier2: setting('SVC_RATE_LIMIT_TIER2', PositiveInt, 1200, 'Requests per minute per key for tier 2 organizations.'),
  rateLimitTier3: setting('SVC_RATE_LIMIT_TIER3', PositiveInt, 12000, 'Requests per minute per key for tier 3 organizations.'),
  tokenLimitTier2: setting('SVC_TOKEN_LIMIT_TIER2', PositiveInt, 2_000_000, 'Tokens per minute per key for tier 2 organizations (prompt plus output, estimated at admission and settled with real usage).'),
  slaCreditCheckMs: setting('SVC_SLA_CREDIT_CHECK_MS', PositiveInt, 60_000, 'How often the leader checks whether running on-demand instances need billing up to the last full hour, whether the month that ended still needs its SLA credits issued and its invoices finalized, and (each hour) whether SLA credits held back at a month end can be issued.'),
  billingIssuer: setting('SVC_BILLING_ISSUER', Type.String({ minLength: 1, maxLength: 200 }), 'GPU Cloud', 'The provider name printed on invoices.'),
  tokenLimitTier3: setting('SVC_TOKEN_LIMIT_TIER3', PositiveInt, 20_000_000, 'Tokens per minute per key for tier 3 organizations.'),
  idempotencyWindowSeconds: setting(
    'SVC_IDEMPOTENCY_WINDOW_SECONDS',
    PositiveInt,
    300,
    'How long a stored response is replayed for a repeated X-Service-Idempotency-Key, from when it was stored.',
  ),
  idempotencyWaitSeconds: setting(
    'SVC_IDEMPOTENCY_WAIT_SECONDS',
    PositiveInt,
    30,
    'How long a duplicate waits for the first request with its idempotency key before 409 conflict.',
  ),
  idempotencyLeaseSeconds: setting(
    'SVC_IDEMPOTENCY_LEASE_SECONDS',
    PositiveInt,
    10,
    'A running request renews its idempotency claim; a claim not renewed for this long (its process died) is taken over by a retry.',
  ),
  idempotencyMaxAnswerBytes: setting(
    'SVC_IDEMPOTENCY_MAX_ANSWER_BYTES',
    PositiveInt,
    1024 * 1024,
    'Largest answer stored for an idempotent replay, in bytes; a larger one is sent but not stored, and its key is released (a retry runs again).',
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
  webhookAllowedTargets: setting(
    'SVC_WEBHOOK_ALLOWED_TARGETS',
    Type.Array(Type.String({ minLength: 1 })),
    [],
    'CIDRs and host names webhooks may reach although not public (comma-separated; e.g. 127.0.0.1 for a receiver on this machine); empty means public addresses only, checked at subscription and at every send.',
  ),
  webhookTimeoutMs: setting(
    'SVC_WEBHOOK_TIMEOUT_MS',
    Type.Integer({ minimum: 100, maximum: 60_000 }),
    10_000,
    'How long one webhook delivery attempt may take (connect to end of response) before it counts as failed.',
  ),
  webhookRetrySchedule: setting(
    'SVC_WEBHOOK_RETRY_SCHEDULE',
    Type.Array(Type.String({ pattern: DURATION_PATTERN }), { minItems: 1, maxItems: 20 }),
    DEFAULT_RETRY_SCHEDULE,
    'Wait before each webhook attempt (first = immediately); after the last fails the delivery is given up. Each wait gets +/-20% jitter.',
  ),
  webhookPollMs: setting(
    'SVC_WEBHOOK_POLL_MS',
    Type.Integer({ minimum: 10, maximum: 60_000 }),
    250,
    'How often the webhook worker looks for new events and due retries (events appended in-process also wake it at once).',
  ),
  skuCatalog: setting(
    'SVC_SKU_CATALOG',
    Type.String(),
    '',
    'Path of the GPU SKU catalog JSON file; empty means the catalog shipped in control-plane/catalog/skus.json.',
  ),
  defaultInstanceImage: setting(
    'SVC_DEFAULT_INSTANCE_IMAGE',
    Type.String({ minLength: 1 }),
    'nvidia/cuda:12.8.1-base-ubuntu24.04',
    'Image of an instance created without `image`: the platform CUDA base image (cu128).',
  ),
  terminationGraceMs: setting(
    'SVC_TERMINATION_GRACE_MS',
    Type.Integer({ minimum: 0, maximum: 3_600_000 }),
    60_000,
    'Grace between SIGTERM and SIGKILL when an instance is terminated gracefully (spec: 60 s).',
  ),
  nodeForgetAfterMs: setting(
    'SVC_NODE_FORGET_AFTER_MS',
    Type.Integer({ minimum: 0 }),
    86_400_000,
    'How long a node must be silent before `svcctl nodes forget` may settle it (end its instances as of its last contact).',
  ),
  poolOrder: setting(
    'SVC_POOL_ORDER',
    Type.Array(Type.Union([Type.Literal('na'), Type.Literal('eu'), Type.Literal('apac')]), { minItems: 1, uniqueItems: true }),
    ['na', 'eu', 'apac'],
    'Pools in order of preference for inference requests that pin none (comma-separated); the healthiest pool wins, ties go by this order.',
  ),
  orgMaxGpus: setting(
    'SVC_ORG_MAX_GPUS',
    PositiveInt,
    64,
    "GPUs one organization's instances may hold at once (those not terminated or failed); a create past it gets 403 quota_exceeded. Keeps one tenant (or a stolen card) from taking a whole pool.",
  ),
  inferenceMaxInFlight: setting(
    'SVC_INFERENCE_MAX_IN_FLIGHT',
    PositiveInt,
    64,
    'Inference requests one model-server replica may hold at once, from all control-plane processes together (on PostgreSQL each process sends an even part, so balance requests evenly across them); when every replica is full, requests get 409 no_capacity.',
  ),
  shutdownDrainMs: setting(
    'SVC_SHUTDOWN_DRAIN_MS',
    Type.Integer({ minimum: 0, maximum: 600_000 }),
    20_000,
    'After SIGTERM, how long requests in flight (streams included) may run before their connections are closed; their usage is recorded either way. Keep it under the supervisor\'s kill timeout (Kubernetes: 30 s); workers are killed 10 s after it.',
  ),
  inferenceMaxOrgShare: setting(
    'SVC_INFERENCE_MAX_ORG_SHARE',
    Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
    0.5,
    "Share of a model variant's in-flight slots in a pool (its replicas times SVC_INFERENCE_MAX_IN_FLIGHT) one organization may hold; once half are taken, each org holding any is held to an equal share. Past it, 429 rate_limited. 1 lets one org take every slot.",
  ),
  inferenceAttempts: setting(
    'SVC_INFERENCE_ATTEMPTS',
    Type.Integer({ minimum: 1, maximum: 5 }),
    3,
    'Replicas one inference request may try when a replica fails before answering.',
  ),
  inferenceConnectTimeoutMs: setting('SVC_INFERENCE_CONNECT_TIMEOUT_MS', PositiveInt, 2000, 'How long connecting to a replica may take.'),
  inferenceFirstByteTimeoutMs: setting(
    'SVC_INFERENCE_FIRST_BYTE_TIMEOUT_MS',
    PositiveInt,
    300_000,
    'How long a replica may take to start answering (a non-streamed completion is generated meanwhile).',
  ),
  inferenceIdleTimeoutMs: setting('SVC_INFERENCE_IDLE_TIMEOUT_MS', PositiveInt, 60_000, 'Longest silence between two chunks of a replica\'s answer.'),
  inferenceSchemaBytesPerMinute: setting(
    'SVC_INFERENCE_SCHEMA_BYTES_PER_MINUTE',
    PositiveInt,
    16 * 1024 * 1024,
    'Bytes of JSON Schema (tools\' parameters, response formats) new to the control plane an organization may have checked a minute, per control-plane process; schemas sent again are not counted. Past it: 429 schema_budget. Checking costs CPU in proportion to size, and a tenant varying every schema could keep a core busy.',
  ),
  inferenceClientStallMs: setting(
    'SVC_INFERENCE_CLIENT_STALL_MS',
    PositiveInt,
    60_000,
    'A stream whose client takes none of the bytes waiting for it this long is ended as if the client had left (the replica\'s work is cancelled, what it generated billed): an engine that waits on its reader would otherwise give that client a slot for as long as it likes.',
  ),
  inferenceEjectMs: setting(
    'SVC_INFERENCE_EJECT_MS',
    PositiveInt,
    1000,
    'How long a replica whose request failed is left out before a health probe; doubles per failed probe up to 30 s.',
  ),
  sandboxDailyTokens: setting(
    'SVC_SANDBOX_DAILY_TOKENS',
    PositiveInt,
    10_000,
    'Tokens a sandbox key (svc_sk_test_) may use per UTC day (spec: 10K); past it, 429 rate_limited with code daily_token_cap.',
  ),
  responsesRetentionDays: setting(
    'SVC_RESPONSES_RETENTION_DAYS',
    PositiveInt,
    30,
    'Days a Responses API response stored with store: true can be read back and chained on (previous_response_id); expired ones are purged hourly.',
  ),
  replicas: setting(
    'SVC_REPLICAS',
    ReplicasSettingSchema,
    'tiny-chat:int4:na=1,tiny-embed:int4:na=1',
    'Model-server replicas to run: model:quantization:pool=count, comma-separated (config file: also a list of {model, quantization, pool, count}); none for no replicas. Checked against the catalog at start.',
  ),
  cpuEngineThreads: setting(
    'SVC_CPU_ENGINE_THREADS',
    Type.Integer({ minimum: 1, maximum: 256 }),
    1,
    'Threads each CPU-engine replica uses (its --threads argument); llama.cpp threads busy-wait for each other, so more than 1 pays only on idle cores.',
  ),
  replicaReconcileMs: setting(
    'SVC_REPLICA_RECONCILE_MS',
    Type.Integer({ minimum: 100, maximum: 60_000 }),
    1000,
    'How often the control plane compares desired replicas with running ones and starts, stops or re-places replicas.',
  ),
  replicaStopGraceMs: setting(
    'SVC_REPLICA_STOP_GRACE_MS',
    Type.Integer({ minimum: 0, maximum: 600_000 }),
    30_000,
    'Grace between SIGTERM and SIGKILL when a replica is stopped, for in-flight requests to finish.',
  ),
  leaderRetryMs: setting(
    'SVC_LEADER_RETRY_MS',
    Type.Integer({ minimum: 100, maximum: 60_000 }),
    1000,
    'On PostgreSQL: how often a replica that does not lead tries to become the leader (which runs the sweeps, reconciler, webhook sending, remediation and month end), and the leader checks it still is; a dead leader is replaced within about this long.',
  ),
  remediation: setting(
    'SVC_REMEDIATION',
    Type.Boolean(),
    true,
    'Act on GPU faults (docs/nodes.md#remediation): drain, notify, reset idle GPUs, cordon nodes for reboot-class XIDs; false only records them.',
  ),
  remediationAutoReset: setting(
    'SVC_REMEDIATION_AUTO_RESET',
    Type.Boolean(),
    true,
    'Reset a drained reset-class GPU through its agent once no workload holds it; false leaves it drained for an operator.',
  ),
  remediationActions: setting(
    'SVC_REMEDIATION_ACTIONS',
    Type.String(),
    '',
    'Overrides of what each NVIDIA bucket triggers, e.g. RESET_GPU=drain_gpu,CONTACT_SUPPORT=timeline (kinds: timeline, drain_gpu, reset_gpu, reboot_node).',
  ),
  remediationTickMs: setting(
    'SVC_REMEDIATION_TICK_MS',
    Type.Integer({ minimum: 100, maximum: 60_000 }),
    1000,
    'How often the remediation reads new GPU faults and moves each open remediation one step.',
  ),
};

export type ControlPlaneConfig = ConfigOf<typeof controlPlaneSettings>;

export function loadControlPlaneConfig(env: Record<string, string | undefined> = process.env): ControlPlaneConfig {
  const config = loadConfig(controlPlaneSettings, { env, file: env.SVC_CONFIG_FILE || undefined });
  // Cross-field and list checks the schema cannot say; each throws ConfigError.
  trustedProxies(config.trustProxy);
  try {
    parseActionOverrides(config.remediationActions);
  } catch (err) {
    throw new ConfigError(err instanceof Error ? err.message : String(err));
  }
  return config;
}

/**
 * A config with every default, for tests and tools that override a few settings. One
 * exception: no replicas (`replicas: []`), so a harness that builds a control plane does
 * not start model servers it did not ask for. The server's own path (loadControlPlaneConfig)
 * keeps the setting's default, the two tiny models that `npm start` serves.
 */
export function defaultControlPlaneConfig(overrides: Partial<ControlPlaneConfig> = {}): ControlPlaneConfig {
  return { ...loadConfig(controlPlaneSettings, { env: {} }), replicas: [], ...overrides };
}
