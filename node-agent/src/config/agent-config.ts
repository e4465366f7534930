// Every node-agent setting, parsed once at start-up by the shared loader (defaults, then
// an optional JSON file named by SVC_AGENT_CONFIG_FILE, then the environment), plus the
// cross-field rules the schema cannot say: TLS material comes in pairs, and plaintext is
// allowed only to a control plane on loopback. docs/node-agent.md lists every setting.
import { hostname } from 'node:os';
import { Type } from '@sinclair/typebox';
import { ConfigError, LOG_FORMATS, loadConfig, setting, type ConfigOf } from '@svc/shared';
import { parsePenaltyPolicy, parseCidr, type PenaltyPolicy } from '../access/source-penalties.js';
import { cidrProblem, DEFAULT_BLOCKED_PORTS, parsePortRules, type PortRule } from '../runtime/firewall-rules.js';
import { SSH_PENALTY_DEFAULT_TEXT, SSH_PENALTY_DEFAULTS, type SshPenaltyKind } from '../ssh/ssh-penalties.js';
import { JUPYTER_PENALTY_DEFAULT_TEXT, JUPYTER_PENALTY_DEFAULTS, type JupyterPenaltyKind } from '../jupyter/jupyter-penalties.js';
import { isLoopbackTarget, parseControlPlaneTargets } from '../transport/address.js';
import { parseSimulatedGpus, type SimulatedGpus } from '../simulation/simulated-gpus.js';

/** XIDs that are the application's fault, not the GPU's; as NVIDIA's k8s device plugin. */
export const DEFAULT_IGNORED_XIDS = '13,31,43,45,68,109';

export const agentSettings = {
  controlPlane: setting(
    'SVC_CONTROL_PLANE',
    Type.String({ minLength: 1 }),
    '127.0.0.1:7070',
    'host:port of the control plane gRPC endpoint the agent dials; several, comma-separated, are control-plane replicas the agent fails over between (a name with several A records counts as several).',
  ),
  keepaliveMs: setting(
    'SVC_AGENT_KEEPALIVE_MS',
    Type.Integer({ minimum: 1000, maximum: 600_000 }),
    5000,
    'How often the agent pings its control-plane connection (HTTP/2 PING) while the stream is open.',
  ),
  keepaliveTimeoutMs: setting(
    'SVC_AGENT_KEEPALIVE_TIMEOUT_MS',
    Type.Integer({ minimum: 500, maximum: 600_000 }),
    3000,
    'A ping unanswered this long declares the connection dead: the session ends and the agent reconnects.',
  ),
  connectTimeoutMs: setting(
    'SVC_AGENT_CONNECT_TIMEOUT_MS',
    Type.Integer({ minimum: 100, maximum: 600_000 }),
    1000,
    'How long one TCP connection attempt may take before the agent gives it up and tries again (the next address, if several); TLS and HTTP/2 then get 10 s.',
  ),
  reconnectMaxMs: setting(
    'SVC_AGENT_RECONNECT_MAX_MS',
    Type.Integer({ minimum: 100, maximum: 600_000 }),
    1000,
    'Cap of the reconnect backoff (exponential from 100 ms, full jitter): an agent is back at most about this long after its control plane is reachable again.',
  ),
  nodeToken: setting(
    'SVC_NODE_TOKEN',
    Type.String(),
    '',
    'One-time enrollment token (svcctl nodes token create); needed only until the node identity is stored.',
    { secret: true },
  ),
  pool: setting(
    'SVC_POOL',
    Type.Union([Type.Literal('na'), Type.Literal('eu'), Type.Literal('apac')]),
    'na',
    'Region pool this node sells its GPUs in.',
  ),
  dataDir: setting(
    'SVC_AGENT_DATA_DIR',
    Type.String({ minLength: 1 }),
    './data/agent',
    'Directory holding the node identity (identity.json, mode 0600), sticky GPU health (gpu-health.json), the SSH host key, the Jupyter port of each instance (jupyter-ports.json) and when each pulled image last ran (image-use.json).',
  ),
  hostname: setting('SVC_AGENT_HOSTNAME', Type.String(), '', 'Name the node reports; empty means the OS hostname.'),
  nvmlLibrary: setting(
    'SVC_NVML_LIBRARY',
    Type.String(),
    '',
    'Path of libnvidia-ml; empty means libnvidia-ml.so.1 through the dynamic loader.',
  ),
  nvidiaSmi: setting(
    'SVC_NVIDIA_SMI',
    Type.String(),
    '',
    'The GPU reset tool, run as `<tool> --gpu-reset -i <uuid>` when the control plane resets an idle GPU; empty means nvidia-smi on PATH (the fake one with SVC_SIMULATE_GPUS).',
  ),
  simulateGpus: setting(
    'SVC_SIMULATE_GPUS',
    Type.String({ pattern: '^$|^[0-8](x.+)?$' }),
    '',
    'Development: load the fake NVML with <count>[x<NVML name>] GPUs instead of the real library (0..8).',
  ),
  tls: setting(
    'SVC_AGENT_TLS',
    Type.Boolean(),
    false,
    'Dial with TLS using the system roots; implied by SVC_AGENT_TLS_CA.',
  ),
  tlsCa: setting('SVC_AGENT_TLS_CA', Type.String(), '', 'PEM file of the CA that signed the control plane certificate.'),
  tlsCert: setting('SVC_AGENT_TLS_CERT', Type.String(), '', 'PEM client certificate for mutual TLS (with SVC_AGENT_TLS_KEY).'),
  tlsKey: setting('SVC_AGENT_TLS_KEY', Type.String(), '', 'PEM private key of the client certificate.'),
  tlsServerName: setting(
    'SVC_AGENT_TLS_SERVER_NAME',
    Type.String(),
    '',
    'Name to verify the control plane certificate against; empty means the host in SVC_CONTROL_PLANE.',
  ),
  ignoredXids: setting(
    'SVC_GPU_IGNORED_XIDS',
    Type.String({ pattern: '^$|^\\s*\\d+\\s*(,\\s*\\d+\\s*)*$' }),
    DEFAULT_IGNORED_XIDS,
    'Comma-separated XIDs that never make a GPU unhealthy, on top of the XID catalog (whose application-level XIDs never do).',
  ),
  maxGpuTemperatureC: setting(
    'SVC_GPU_MAX_TEMPERATURE_C',
    Type.Integer({ minimum: 1, maximum: 150 }),
    90,
    'A GPU at or above this temperature is unhealthy (thermal).',
  ),
  temperatureHysteresisC: setting(
    'SVC_GPU_TEMPERATURE_HYSTERESIS_C',
    Type.Integer({ minimum: 0, maximum: 50 }),
    5,
    'A hot GPU is healthy again once it is this many degrees below the maximum.',
  ),
  replicaHost: setting(
    'SVC_REPLICA_HOST',
    Type.String({ minLength: 1 }),
    '127.0.0.1',
    'Address model-server replicas are published on (a port Docker picks) and that the control plane reaches them at.',
  ),
  replicaHealthIntervalMs: setting(
    'SVC_REPLICA_HEALTH_INTERVAL_MS',
    Type.Integer({ minimum: 100, maximum: 600_000 }),
    2000,
    "How often the agent health-checks a replica that passed its first check (while it loads: every 250 ms).",
  ),
  replicaStartTimeoutMs: setting(
    'SVC_REPLICA_START_TIMEOUT_MS',
    Type.Integer({ minimum: 1000 }),
    1_200_000,
    'A replica not healthy this long after its container started is restarted (weights may download and load first).',
  ),
  replicaUnhealthyRestartMs: setting(
    'SVC_REPLICA_UNHEALTHY_RESTART_MS',
    Type.Integer({ minimum: 0 }),
    60_000,
    'A replica that stays unhealthy this long is restarted; 0 never restarts it for failing checks alone.',
  ),
  sshPort: setting(
    'SVC_SSH_PORT',
    Type.Integer({ minimum: 0, maximum: 65535 }),
    2222,
    'Port of the SSH gateway into instances (user = instance id); 0 picks a free port.',
  ),
  jupyterPort: setting(
    'SVC_JUPYTER_PORT',
    Type.Integer({ minimum: 0, maximum: 65535 }),
    8890,
    "First port of the Jupyter range: each instance's Jupyter gets a port (its own browser origin) from SVC_JUPYTER_PORT on; 0 lets the OS pick a free port for each.",
  ),
  jupyterPortCount: setting(
    'SVC_JUPYTER_PORT_COUNT',
    Type.Integer({ minimum: 1, maximum: 10000 }),
    100,
    'How many ports the Jupyter range has: the most instances with Jupyter at once on this node.',
  ),
  jupyterStartTimeoutMs: setting(
    'SVC_JUPYTER_START_TIMEOUT_MS',
    Type.Integer({ minimum: 1000, maximum: 600_000 }),
    60_000,
    "How long an instance's Jupyter has to answer through the proxy before the instance is ready without it (jupyter_unavailable_reason says so).",
  ),
  publicHost: setting(
    'SVC_PUBLIC_HOST',
    Type.String({ minLength: 1 }),
    '127.0.0.1',
    'Host name or address users reach this node\'s SSH gateway and Jupyter proxy at (shown in instance reads).',
  ),
  accessBindHost: setting(
    'SVC_ACCESS_BIND_HOST',
    Type.String({ minLength: 1 }),
    '0.0.0.0',
    'Address the SSH gateway and the Jupyter proxy listen on.',
  ),
  // Bounds on the connections anyone can open to the Jupyter ports (docs/ssh-jupyter.md, "Limits").
  jupyterMaxConnections: setting(
    'SVC_JUPYTER_MAX_CONNECTIONS',
    Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    8192,
    "TCP connections open to this node's Jupyter ports at once, across every instance. Once full, a new connection takes the oldest connection that has not shown a token of the client holding the most such connections (an IPv6 client counted by its /48), if that client holds more than the newcomer's; else it is closed at once.",
  ),
  jupyterMaxConnectionsPerSource: setting(
    'SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE',
    Type.Integer({ minimum: 1, maximum: 100_000 }),
    256,
    "TCP connections to this node's Jupyter ports from one source address (an IPv6 source: its /64; its /48 may hold four times as many) at once, across every instance; more are closed at once.",
  ),
  jupyterNodeMbps: setting(
    'SVC_JUPYTER_NODE_MBPS',
    Type.Integer({ minimum: 1 }),
    500,
    "Mbit/s each way through the Jupyter proxy for all instances together, shared equally among the instances with a Jupyter connection that showed the token (an instance never gets more than its own bandwidth): every byte relayed costs the agent's CPU (measured: 1 GiB held to 500 Mbit/s cost 3.6-4.1 s, a fifth of a core while it lasted).",
  ),
  jupyterRequestsPerSecond: setting(
    'SVC_JUPYTER_REQUESTS_PER_SECOND',
    Type.Integer({ minimum: 0, maximum: 100_000 }),
    100,
    "Requests (and WebSocket opens) a second one instance's Jupyter port forwards, four seconds' worth at once; past it they wait their turn, none is refused. Each costs the agent's one thread, which every tenant's SSH and Jupyter share (measured: 378 us a request; one client kept the agent at 95% of a core against a tenant's own fast server on the Jupyter port). 0: unpaced.",
  ),
  jupyterSourcePenalties: setting(
    'SVC_JUPYTER_SOURCE_PENALTIES',
    Type.String({ minLength: 1 }),
    JUPYTER_PENALTY_DEFAULT_TEXT,
    "Penalties for Jupyter requests refused for want of the instance's token or for a path no instance serves (401, 404), in SVC_SSH_SOURCE_PENALTIES's syntax: each adds its time to its source (an IPv6 source: its /64, and its /48, refused past four times min and draining four times as fast), draining in real time; while a source's penalty exceeds min, its connections to every Jupyter port are closed at once, before a byte is read. Words given override the defaults; off: no penalties. Behind a TLS proxy that hides its clients, exempt the proxy (SVC_JUPYTER_PENALTY_EXEMPT).",
  ),
  jupyterPenaltyExempt: setting(
    'SVC_JUPYTER_PENALTY_EXEMPT',
    Type.String(),
    '',
    'Comma-separated addresses and CIDRs (IPv4 or IPv6) never penalized on the Jupyter ports: monitoring, or a proxy in front of them that hides its clients.',
  ),
  jupyterPublicUrl: setting(
    'SVC_JUPYTER_PUBLIC_URL',
    Type.String({ pattern: '^$|^https?://[^/?#]*\\{port\\}[^/?#]*$' }),
    '',
    "Origin of Jupyter URLs when a TLS proxy fronts the Jupyter ports; {port} is the instance's port, so origins stay per instance (https://node7.example.com:{port} or https://j{port}.node7.example.com); empty means http://<public host>:<port>.",
  ),
  instanceOutbound: setting(
    'SVC_INSTANCE_OUTBOUND',
    Type.Union([Type.Literal('internet'), Type.Literal('none')]),
    'internet',
    'Whether instances may open connections to the internet (`none`: a Docker internal network). Never to the host, other tasks, private ranges or metadata.',
  ),
  instanceAllowCidrs: setting(
    'SVC_INSTANCE_ALLOW_CIDRS',
    Type.String(),
    '',
    'Comma-separated IPv4 addresses/CIDRs in private ranges that instances may still reach (a DNS resolver, a package mirror).',
  ),
  instanceBlockedPorts: setting(
    'SVC_INSTANCE_BLOCKED_PORTS',
    Type.String(),
    DEFAULT_BLOCKED_PORTS,
    "Comma-separated ports instances may not reach outside the allowed CIDRs (`tcp:25`, `udp:1900`, `tcp:6660-6669`); `none` blocks none. By default SMTP's port 25: every instance on a node leaves from the host's address, so one tenant's spam would get it listed for all of them. Mail submission (587, 465) stays open.",
  ),
  instancePrivateRegistries: setting(
    'SVC_INSTANCE_PRIVATE_REGISTRIES',
    Type.String(),
    '',
    "Comma-separated registries (`host` or `host:port`, as image names write them) instances may pull from although they are on loopback, private or link-local addresses, e.g. the provider's own mirror. Others on such addresses are refused: Docker pulls from the host's place in the network, and its errors, which the tenant reads, quote what answered.",
  ),
  replicaRegistries: setting(
    'SVC_REPLICA_REGISTRIES',
    Type.String(),
    '',
    "Comma-separated registries (`host` or `host:port`, as image names write them) that hold the provider's own model-server images, on loopback, private or link-local addresses: replicas pull from them, instances may not (neither a pull nor a copy already on the node), and the pull proxy lets dockerd reach them only while a replica's pull from one is under way. List only registries of your own images: an instance naming one fails.",
  ),
  pullProxyPort: setting(
    'SVC_PULL_PROXY_PORT',
    Type.Integer({ minimum: 0, maximum: 65535 }),
    3129,
    "Port on 127.0.0.1 of the proxy dockerd fetches images through (set HTTP_PROXY and HTTPS_PROXY in dockerd's environment to http://127.0.0.1:<port>): every connection a pull makes, to a registry, its token service or a redirected download, must go to a public address or a registry in SVC_INSTANCE_PRIVATE_REGISTRIES (or in SVC_REPLICA_REGISTRIES while a replica pulls from one). The agent warns at start when dockerd does not use it. 0 picks a free port.",
  ),
  hostFirewall: setting(
    'SVC_HOST_FIREWALL',
    Type.Boolean(),
    true,
    'Install the iptables rules that keep containers away from the host and each other at start (the agent stops if it cannot). false only where another firewall does it.',
  ),
  containerCoreDumps: setting(
    'SVC_CONTAINER_CORE_DUMPS',
    Type.Boolean(),
    true,
    "Keep core dumps inside the crashing container: a kernel.core_pattern that hands them to a program or socket on the host (systemd-coredump, apport) is set to `core` at start, because the kernel would start that program on the host's CPU, outside the container's quota, for every crash. false leaves the host's pattern.",
  ),
  reservedCpus: setting(
    'SVC_HOST_RESERVED_CPUS',
    Type.Number({ minimum: 0 }),
    1,
    'CPUs no task may use (kept for the agent, Docker and the OS); task CPU limits are clamped to the host less this.',
  ),
  reservedMemoryMib: setting(
    'SVC_HOST_RESERVED_MEMORY_MIB',
    Type.Integer({ minimum: 0 }),
    2048,
    'Memory (MiB) no task may use; task memory limits are clamped to the host less this.',
  ),
  taskPidsLimit: setting(
    'SVC_TASK_PIDS_LIMIT',
    Type.Integer({ minimum: 16, maximum: 4_194_304 }),
    4096,
    'Most processes and threads one task container may have (a fork bomb stops there).',
  ),
  taskDiskGib: setting(
    'SVC_TASK_DISK_GIB',
    Type.Number({ exclusiveMinimum: 0 }),
    50,
    'Disk (GiB) an instance may fill on the host (writable layer, volumes, deleted files held open) when its start order names none (an older control plane); the SKU catalog sets it otherwise.',
  ),
  taskNetworkMbps: setting(
    'SVC_TASK_NETWORK_MBPS',
    Type.Integer({ minimum: 1 }),
    1000,
    'Network bandwidth (Mbit/s, each way) of an instance when its start order names none (an older control plane); the SKU catalog sets it otherwise. Shaped with tc on the instance\'s bridge and its own interface.',
  ),
  taskDiskBandwidthMbPerGpu: setting(
    'SVC_TASK_DISK_BANDWIDTH_MB_PER_GPU',
    Type.Integer({ minimum: 0, maximum: 1_000_000 }),
    500,
    "MB/s (10^6 bytes) an instance may read, and as many write, on the disk holding Docker's data, per GPU it has (an instance without GPUs counts one): the kernel throttles the rest, so one tenant cannot take the disk every other tenant, image pull and log shares. Under cgroup v1 writes the kernel flushes in the background escape it (they are not charged to the container); cgroup v2 holds them too. 0: not limited.",
  ),
  taskDiskIopsPerGpu: setting(
    'SVC_TASK_DISK_IOPS_PER_GPU',
    Type.Integer({ minimum: 0, maximum: 100_000_000 }),
    20_000,
    "Read operations a second an instance may issue, and as many writes, on the disk holding Docker's data, per GPU it has (an instance without GPUs counts one); 0: not limited.",
  ),
  taskMaxConnections: setting(
    'SVC_TASK_MAX_CONNECTIONS',
    Type.Integer({ minimum: 1 }),
    16384,
    "Connections (TCP, UDP flows) one instance may hold open through the host; past it, new ones are refused. The host's connection table (nf_conntrack_max) is shared: keep the instances' sum well under it. One value per host (the firewall is host-wide).",
  ),
  taskDnsQueriesPerSecond: setting(
    'SVC_TASK_DNS_QUERIES_PER_SECOND',
    Type.Integer({ minimum: 0, maximum: 10_000 }),
    100,
    "Queries a second (twice that in a burst) an instance may send Docker's embedded DNS server (127.0.0.11), which is dockerd itself: past it they are dropped inside the instance's network namespace, on its CPU, before dockerd's. Public resolvers asked directly are not counted. 0: no cap (a flood keeps dockerd at a core).",
  ),
  taskMaxPtys: setting(
    'SVC_TASK_MAX_PTYS',
    Type.Integer({ minimum: 0, maximum: 65_536 }),
    1024,
    "Pseudo-terminals an instance may hold open at once (SSH sessions with a terminal, tmux panes, Jupyter terminals). Each instance gets a /dev/pts of its own with this cap: the kernel counts every container's terminals in one table for the host, and one instance that filled it (3,071 by default) left every other tenant without `ssh -t` or `docker exec -t`. 0: Docker's /dev/pts, uncapped.",
  ),
  taskLogBytesPerSecond: setting(
    'SVC_TASK_LOG_BYTES_PER_SECOND',
    Type.Integer({ minimum: 0 }),
    1_048_576,
    "Bytes a second of an instance's output (stdout and stderr) that reach its Docker log; past it the instance's writes wait. A limiter compiled at start (gcc, static libc) runs in front of the image's command, so the copying is on the instance's CPU, not the host's. 0: no limiter (Docker copies whatever it prints, outside its CPU quota).",
  ),
  taskLogLinesPerSecond: setting(
    'SVC_TASK_LOG_LINES_PER_SECOND',
    Type.Integer({ minimum: 1 }),
    10_000,
    "Lines a second of an instance's output that reach its Docker log (Docker's cost is per line as much as per byte).",
  ),
  taskMaxFiles: setting(
    'SVC_TASK_MAX_FILES',
    Type.Integer({ minimum: 1000 }),
    5_000_000,
    'Files (inodes) one instance may hold on the disk holding Docker data; the disk watch stops one over it, as over its disk limit. A file system holds only so many, and empty files take no bytes.',
  ),
  pullStallSeconds: setting(
    'SVC_PULL_STALL_SECONDS',
    Type.Integer({ minimum: 1 }),
    120,
    "A pull that moves (downloads or unpacks) less than 1 MiB in this many seconds is given up and its instance fails (no charge): a tenant's registry that answers and then sends nothing would otherwise hold the instance's GPUs, unbilled, for as long as it likes.",
  ),
  pullTimeoutMinutes: setting(
    'SVC_PULL_TIMEOUT_MINUTES',
    Type.Number({ exclusiveMinimum: 0 }),
    60,
    'A pull still going after this many minutes is given up and its instance fails (no charge): a registry trickling just fast enough, or an image too big for the link.',
  ),
  maxImageGib: setting(
    'SVC_MAX_IMAGE_GIB',
    Type.Number({ exclusiveMinimum: 0 }),
    100,
    'Largest image (GiB of compressed layers) the agent pulls for a task; a larger one fails the instance with a pull error instead of filling the disk.',
  ),
  imageGcHighPercent: setting(
    'SVC_IMAGE_GC_HIGH_PERCENT',
    Type.Integer({ minimum: 0, maximum: 100 }),
    85,
    "Percent of the disk holding Docker's data in use from which the agent removes images it pulled that no container uses, least recently used first.",
  ),
  imageGcLowPercent: setting(
    'SVC_IMAGE_GC_LOW_PERCENT',
    Type.Integer({ minimum: 0, maximum: 100 }),
    80,
    'Percent of that disk image removal brings it back under; below SVC_IMAGE_GC_HIGH_PERCENT.',
  ),
  imageGcIntervalMs: setting('SVC_IMAGE_GC_INTERVAL_MS', Type.Integer({ minimum: 1000, maximum: 86_400_000 }), 300_000, 'Pause between two looks at that disk for images to remove.'),
  diskPressurePercent: setting(
    'SVC_DISK_PRESSURE_PERCENT',
    Type.Integer({ minimum: 1, maximum: 100 }),
    90,
    "Percent of the disk holding Docker's data in use from which the node reports disk pressure and the control plane places nothing on it (checked every SVC_TASK_DISK_CHECK_MS, and every second while a pull runs, which it stops).",
  ),
  taskDiskCheckMs: setting(
    'SVC_TASK_DISK_CHECK_MS',
    Type.Integer({ minimum: 100, maximum: 3_600_000 }),
    10_000,
    'Pause between two measurements of every instance\'s disk; one found over its limit is stopped. Shorter catches a fast writer sooner, at more disk reads.',
  ),
  // Bounds on what one tenant can make the SSH gateway hold (docs/ssh-jupyter.md, "Limits").
  sshMaxChannelsPerConnection: setting(
    'SVC_SSH_MAX_CHANNELS_PER_CONNECTION',
    Type.Integer({ minimum: 1, maximum: 1000 }),
    10,
    'Open channels (sessions, sftp, ssh -L forwards) one SSH connection may hold; further opens are refused.',
  ),
  sshMaxConnectionsPerInstance: setting(
    'SVC_SSH_MAX_CONNECTIONS_PER_INSTANCE',
    Type.Integer({ minimum: 1, maximum: 10_000 }),
    32,
    'Authenticated SSH connections one instance may have at once; a login past it is refused.',
  ),
  sshNodeMbps: setting(
    'SVC_SSH_NODE_MBPS',
    Type.Integer({ minimum: 1 }),
    2000,
    "Mbit/s each way through the SSH gateway (sessions, SFTP, ssh -L) for all instances together, shared equally among the instances logged in (an instance never gets more than its own bandwidth): every byte costs the agent's thread its encryption and dockerd its exec stream, on the host's CPU.",
  ),
  sshEngineCallsPerSecond: setting(
    'SVC_SSH_ENGINE_CALLS_PER_SECOND',
    Type.Integer({ minimum: 0, maximum: 100_000 }),
    40,
    "Docker engine calls a second one instance's SSH and SFTP may make, four seconds' worth at once: a stat, listing, upload, download or terminal resize counts 1, a login 4 (a key exchange on the agent's thread), starting a process (each session, each SFTP remove, rename or chmod) 8. Each call costs dockerd, containerd and runc the host's CPU outside the instance's quota (about 40 ms a process); past the rate calls wait, none is refused. 0: unpaced.",
  ),
  sshMaxConnectionsPerSource: setting(
    'SVC_SSH_MAX_CONNECTIONS_PER_SOURCE',
    Type.Integer({ minimum: 1, maximum: 100_000 }),
    64,
    'TCP connections to the SSH gateway from one source address (an IPv6 source: its /64) at once, authenticated or not; more are closed at once.',
  ),
  sshMaxPendingHandshakes: setting(
    'SVC_SSH_MAX_PENDING_HANDSHAKES',
    Type.Integer({ minimum: 1, maximum: 100_000 }),
    64,
    "SSH connections not yet authenticated, node-wide. Once full, a new connection takes the oldest slot of the client holding the most (an IPv6 client counted by its /48), if that client holds more than the newcomer's; else it is closed at once.",
  ),
  sshHandshakeTimeoutMs: setting(
    'SVC_SSH_HANDSHAKE_TIMEOUT_MS',
    Type.Integer({ minimum: 100, maximum: 600_000 }),
    30_000,
    'An SSH connection not authenticated this long after it opened is closed (OpenSSH: LoginGraceTime).',
  ),
  sshMaxAuthTries: setting(
    'SVC_SSH_MAX_AUTH_TRIES',
    Type.Integer({ minimum: 1, maximum: 100 }),
    6,
    'Failed authentication attempts per SSH connection before it is closed (OpenSSH: MaxAuthTries).',
  ),
  sshSourcePenalties: setting(
    'SVC_SSH_SOURCE_PENALTIES',
    Type.String({ minLength: 1 }),
    SSH_PENALTY_DEFAULT_TEXT,
    "Penalties for SSH connections that end without logging in, as OpenSSH's PerSourcePenalties: each adds its time to its source (an IPv6 source: its /64, and its /48, refused past four times min and draining four times as fast), which drains in real time; while a source's penalty exceeds min, its connections are closed at once, before the key exchange (about 1 ms of the agent's CPU each, measured, which a client can ask for without doing any work itself). noauth: left without trying to log in; authfail: left after failed logins; grace-exceeded: closed at SVC_SSH_HANDSHAKE_TIMEOUT_MS. Words given override the defaults; off: no penalties.",
  ),
  sshPenaltyExempt: setting(
    'SVC_SSH_PENALTY_EXEMPT',
    Type.String(),
    '',
    'Comma-separated addresses and CIDRs (IPv4 or IPv6) never penalized: monitoring that probes the SSH port, a bastion, a load balancer that hides its clients.',
  ),
  sshMaxEnvVars: setting(
    'SVC_SSH_MAX_ENV_VARS',
    Type.Integer({ minimum: 0, maximum: 4096 }),
    64,
    'Environment variables a client may pass to one session (SendEnv/SetEnv); more are refused.',
  ),
  sshMaxEnvBytes: setting(
    'SVC_SSH_MAX_ENV_BYTES',
    Type.Integer({ minimum: 0, maximum: 16_777_216 }),
    65_536,
    'Total bytes of names and values a client may pass to one session; a variable past it is refused.',
  ),
  sshMaxPtyDimension: setting(
    'SVC_SSH_MAX_PTY_DIMENSION',
    Type.Integer({ minimum: 80, maximum: 65_535 }),
    1000,
    'Largest terminal rows or columns a session gets; larger sizes asked for are cut to it.',
  ),
  sftpStageLimitBytes: setting(
    'SVC_SFTP_STAGE_LIMIT_BYTES',
    Type.Integer({ minimum: 0 }),
    67_108_864,
    'Largest file SFTP writes stage on the node, only for images without /bin/sh (others stream into the container).',
  ),
  sftpStageBudgetBytes: setting(
    'SVC_SFTP_STAGE_BUDGET_BYTES',
    Type.Integer({ minimum: 0 }),
    268_435_456,
    'Bytes all SFTP uploads of one instance may hold staged on the node at once, across its sessions (images without /bin/sh only).',
  ),
  sftpReorderWindowBytes: setting(
    'SVC_SFTP_REORDER_WINDOW_BYTES',
    Type.Integer({ minimum: 0, maximum: 268_435_456 }),
    4_194_304,
    'How far ahead of an upload\'s position SFTP writes may arrive and wait in memory for the gap before them.',
  ),
  grpcMaxMessageBytes: setting(
    'SVC_AGENT_GRPC_MAX_MESSAGE_BYTES',
    Type.Integer({ minimum: 65_536, maximum: 1_073_741_824 }),
    4_194_304,
    'Largest gRPC message the agent sends or accepts on its control plane stream.',
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
    'Log format: pretty (pino-pretty, for people), json (one object per line, for collectors), or auto: pretty when stdout is a terminal, json otherwise.',
  ),
};

export type AgentSettings = ConfigOf<typeof agentSettings>;

/** The settings plus what is derived from them once. */
export interface AgentConfig extends AgentSettings {
  /** The hostname to report (SVC_AGENT_HOSTNAME or the OS's). */
  nodeName: string;
  ignoredXidSet: ReadonlySet<number>;
  simulation: SimulatedGpus | undefined;
  /** True when the channel uses TLS. */
  useTls: boolean;
  /** SVC_INSTANCE_ALLOW_CIDRS as a list. */
  instanceAllowCidrList: string[];
  /** SVC_INSTANCE_BLOCKED_PORTS parsed. */
  instanceBlockedPortList: PortRule[];
  /** SVC_INSTANCE_PRIVATE_REGISTRIES as a list, lower case. */
  instancePrivateRegistryList: string[];
  /** SVC_REPLICA_REGISTRIES as a list, lower case. */
  replicaRegistryList: string[];
  /** SVC_SSH_SOURCE_PENALTIES and SVC_SSH_PENALTY_EXEMPT parsed; null: off. */
  sshPenalties: PenaltyPolicy<SshPenaltyKind> | null;
  /** SVC_JUPYTER_SOURCE_PENALTIES and SVC_JUPYTER_PENALTY_EXEMPT parsed; null: off. */
  jupyterPenalties: PenaltyPolicy<JupyterPenaltyKind> | null;
  /** SVC_CONTROL_PLANE as a list of gRPC targets, tried in order. */
  controlPlanes: string[];
}

export function loadAgentConfig(env: Record<string, string | undefined> = process.env): AgentConfig {
  const settings = loadConfig(agentSettings, { env, file: env.SVC_AGENT_CONFIG_FILE || undefined });
  return deriveAgentConfig(settings);
}

/** Applies the cross-field rules and derives the parsed forms. Throws ConfigError. */
export function deriveAgentConfig(settings: AgentSettings): AgentConfig {
  if (Boolean(settings.tlsCert) !== Boolean(settings.tlsKey)) {
    throw new ConfigError('SVC_AGENT_TLS_CERT and SVC_AGENT_TLS_KEY go together (mutual TLS needs both)');
  }
  const useTls = settings.tls || settings.tlsCa !== '' || settings.tlsCert !== '';
  let controlPlanes: string[];
  try {
    controlPlanes = parseControlPlaneTargets(settings.controlPlane);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  const offLoopback = controlPlanes.find((target) => !isLoopbackTarget(target));
  if (!useTls && offLoopback !== undefined) {
    throw new ConfigError(
      `refusing plaintext gRPC to ${offLoopback}: plaintext is allowed only to a loopback control plane. ` +
        'Set SVC_AGENT_TLS_CA (and SVC_AGENT_TLS_CERT/SVC_AGENT_TLS_KEY for mutual TLS), or SVC_AGENT_TLS=true for a publicly trusted certificate.',
    );
  }
  if (settings.imageGcLowPercent > settings.imageGcHighPercent) {
    throw new ConfigError(`SVC_IMAGE_GC_LOW_PERCENT ${settings.imageGcLowPercent} is above SVC_IMAGE_GC_HIGH_PERCENT ${settings.imageGcHighPercent}`);
  }
  if (settings.jupyterPort !== 0 && settings.jupyterPort + settings.jupyterPortCount - 1 > 65535) {
    throw new ConfigError(`SVC_JUPYTER_PORT ${settings.jupyterPort} plus SVC_JUPYTER_PORT_COUNT ${settings.jupyterPortCount} ports runs past port 65535`);
  }
  const instanceAllowCidrList = commaList(settings.instanceAllowCidrs);
  for (const cidr of instanceAllowCidrList) {
    const problem = cidrProblem(cidr);
    if (problem) throw new ConfigError(`SVC_INSTANCE_ALLOW_CIDRS: ${problem}`);
  }
  let instanceBlockedPortList: PortRule[];
  try {
    instanceBlockedPortList = settings.instanceBlockedPorts.trim() === 'none' ? [] : parsePortRules(commaList(settings.instanceBlockedPorts));
  } catch (err) {
    throw new ConfigError(`SVC_INSTANCE_BLOCKED_PORTS: ${(err as Error).message}`);
  }
  const instancePrivateRegistryList = registryList('SVC_INSTANCE_PRIVATE_REGISTRIES', settings.instancePrivateRegistries);
  const replicaRegistryList = registryList('SVC_REPLICA_REGISTRIES', settings.replicaRegistries);
  const both = replicaRegistryList.find((entry) => instancePrivateRegistryList.includes(entry));
  if (both !== undefined) {
    throw new ConfigError(`${both} is in both SVC_INSTANCE_PRIVATE_REGISTRIES and SVC_REPLICA_REGISTRIES: a registry is open to instances, or kept for the node's own images`);
  }
  const ignoredXidSet = new Set(commaList(settings.ignoredXids).map(Number));
  return {
    ...settings,
    nodeName: settings.hostname || hostname(),
    ignoredXidSet,
    simulation: simulationOf(settings.simulateGpus),
    useTls,
    instanceAllowCidrList,
    instanceBlockedPortList,
    instancePrivateRegistryList,
    replicaRegistryList,
    sshPenalties: penaltiesOf(
      { name: 'SVC_SSH_SOURCE_PENALTIES', text: settings.sshSourcePenalties },
      { name: 'SVC_SSH_PENALTY_EXEMPT', text: settings.sshPenaltyExempt },
      SSH_PENALTY_DEFAULTS,
    ),
    jupyterPenalties: penaltiesOf(
      { name: 'SVC_JUPYTER_SOURCE_PENALTIES', text: settings.jupyterSourcePenalties },
      { name: 'SVC_JUPYTER_PENALTY_EXEMPT', text: settings.jupyterPenaltyExempt },
      JUPYTER_PENALTY_DEFAULTS,
    ),
    controlPlanes,
  };
}

/** A comma-separated list of registries (`host` or `host:port`), lower case; throws ConfigError naming the setting. */
function registryList(name: string, text: string): string[] {
  const entries = commaList(text).map((entry) => entry.toLowerCase());
  const bad = entries.find((entry) => !/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/.test(entry));
  if (bad !== undefined) throw new ConfigError(`${name}: "${bad}" is not a registry (host or host:port, as in 127.0.0.1:5000 or mirror.internal)`);
  return entries;
}

/** The items of a comma-separated setting, trimmed, empty ones left out. */
function commaList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A penalty setting and its exempt list parsed; null: off. Throws ConfigError naming the setting. */
function penaltiesOf<Kind extends string>(
  setting: { name: string; text: string },
  exemptSetting: { name: string; text: string },
  defaults: Omit<PenaltyPolicy<Kind>, 'exempt'>,
): PenaltyPolicy<Kind> | null {
  const exempt = commaList(exemptSetting.text);
  try {
    for (const cidr of exempt) parseCidr(cidr);
  } catch (err) {
    throw new ConfigError(`${exemptSetting.name}: ${(err as Error).message}`);
  }
  try {
    return parsePenaltyPolicy(setting.text, defaults, exempt);
  } catch (err) {
    throw new ConfigError(`${setting.name}: ${(err as Error).message}`);
  }
}

function simulationOf(value: string): SimulatedGpus | undefined {
  try {
    return parseSimulatedGpus(value);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}
