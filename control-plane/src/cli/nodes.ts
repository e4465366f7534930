// svcctl nodes list|show|timeline|gpus|cordon|uncordon|drain|forget|free-gpus, nodes token
// create|list|revoke, nodes gpu reset-health. Reads come from the store the server flushes
// every report interval; reset-health queues a command the running server sends to the
// agent, and --wait polls the command through the client (local or remote alike).
import type { Command } from 'commander';
import { systemClock } from '@svc/shared/clock';
import { parseTtlSeconds } from '../nodes/node-credentials.js';
import { isolationWarnings } from '../nodes/node-status.js';
import { clockOffsetMs } from '../nodes/dcgm-metrics.js';
import { isPool } from '../models/pools.js';
import { formatAgo, formatGiB, shortUuid } from '../nodes/views.js';
import type { OperatorClient } from '../operators/fleet-operations.js';
import { withClient } from './context.js';
import { printJson, printTable, say, wholeNumber } from './output.js';

const dash = (value: number | string | null | undefined, unit = ''): string =>
  value === null || value === undefined || value === '' ? '-' : `${value}${unit}`;

const msOf = (iso: string | null): number | null => (iso === null ? null : Date.parse(iso));

export function registerNodeCommands(program: Command): void {
  const nodes = program.command('nodes').description('GPU nodes: list, show, cordon, drain, enrollment tokens, GPU health');

  nodes
    .command('list')
    .description('every node: pool, status, healthy/total GPUs, utilization, last seen')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const views = await client.listNodes();
        if (opts.json) return printJson(views);
        const now = systemClock.now();
        printTable(
          ['NODE', 'HOSTNAME', 'POOL', 'STATUS', 'GPUS (HEALTHY/TOTAL)', 'UTIL', 'LAST SEEN'],
          views.data.map((v) => [v.id, v.hostname, v.pool, v.status_label, `${v.gpus_healthy}/${v.gpus_total}`, dash(v.avg_utilization_percent, '%'), formatAgo(msOf(v.last_seen_at), now)]),
        );
      }),
    );

  nodes
    .command('show <node>')
    .description('one node (id or hostname): host facts, GPUs, recent health timeline')
    .option('--events <n>', 'timeline rows to show', '20')
    .option('--json', 'print JSON', false)
    .action(async (ref: string, opts, cmd: Command) => {
      const limit = wholeNumber(opts.events, '--events', 1);
      await withClient(cmd, async (client) => {
        const result = await client.showNode(ref, limit);
        if (opts.json) return printJson(result);
        printNodeDetail(result, systemClock.now(), msOf(result.last_seen_at));
      });
    });

  nodes
    .command('timeline <node>')
    .description('the health timeline of a node, newest first: XID, ECC, thermal events and health verdicts')
    .option('--gpu <gpu>', 'only this GPU (uuid or index)')
    .option('--limit <n>', 'how many events', '50')
    .option('--json', 'print JSON', false)
    .action(async (ref: string, opts, cmd: Command) => {
      const limit = wholeNumber(opts.limit, '--limit', 1);
      await withClient(cmd, async (client) => {
        const events = await client.nodeTimeline(ref, limit, opts.gpu);
        if (opts.json) return printJson(events);
        printTable(
          ['AT', 'EVENT', 'GPU', 'XID', 'ACTION', 'DETAIL'],
          events.data.map((e) => [e.at, e.kind, e.gpu_index === null ? '' : String(e.gpu_index), e.xid === null ? '' : String(e.xid), e.recommended_action ?? '', e.message]),
        );
      });
    });

  nodes
    .command('gpus')
    .description('every GPU of the fleet: node, pool, health, memory, utilization')
    .option('--pool <pool>', 'only this pool')
    .option('--unhealthy', 'only unhealthy GPUs', false)
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const gpus = await client.listGpus({ pool: opts.pool, unhealthy: opts.unhealthy || undefined });
        if (opts.json) return printJson(gpus);
        printTable(
          ['NODE', 'POOL', '#', 'NAME', 'UUID', 'MEM USED/TOTAL GiB', 'UTIL', 'HEALTH'],
          gpus.data.map((g) => [
            g.hostname,
            g.pool,
            g.index,
            g.name,
            shortUuid(g.uuid),
            `${formatGiB(g.memory_used_bytes)}/${formatGiB(g.memory_total_bytes)}`,
            dash(g.utilization_gpu_percent, '%'),
            g.healthy ? 'healthy' : `UNHEALTHY: ${g.health_reason}`,
          ]),
        );
      }),
    );

  for (const [name, description] of [
    ['cordon', 'place no new work on the node (running work stays)'],
    ['uncordon', 'let the scheduler use the node again (clears cordon and drain)'],
    ['drain', 'cordon the node and mark it draining: its work is to be moved or ended'],
  ] as const) {
    nodes
      .command(`${name} <node>`)
      .description(description)
      .option('--json', 'print JSON', false)
      .action(async (ref: string, opts, cmd: Command) =>
        withClient(cmd, async (client) => {
          const view = await client.setNodeState(ref, name);
          if (opts.json) return printJson(view);
          say(`${view.id} (${view.hostname}) is now ${view.status_label}.\n`);
        }),
      );
  }

  nodes
    .command('forget <node>')
    .description(
      'settle a node that is gone for good: its instances end as of its last contact (billed up to it; unready ones are refunded), ' +
        'the node is cordoned and marked forgotten; only after SVC_NODE_FORGET_AFTER_MS without contact',
    )
    .option('--json', 'print JSON', false)
    .action(async (ref: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const result = await client.forgetNode(ref);
        if (opts.json) return printJson(result);
        say(`${result.id} (${result.hostname}) is forgotten; ${result.instances.length} instance(s) settled as of ${result.last_seen_at ?? 'never'}.\n`);
        for (const i of result.instances) say(`  ${i.id} ${i.status}\n`);
      }),
    );

  nodes
    .command('free-gpus')
    .description('healthy free GPUs of a model per schedulable node (what the scheduler sees)')
    .requiredOption('--model <name>', 'GPU model as NVML names it, e.g. "NVIDIA H100 80GB HBM3"')
    .option('--pool <pool>', 'na, eu or apac (default: every pool)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) => {
      if (opts.pool !== undefined && !isPool(opts.pool)) throw new Error(`unknown pool "${opts.pool}"; pools are: na, eu, apac`);
      await withClient(cmd, async (client) => {
        const found = await client.freeGpus(opts.model, opts.pool);
        if (opts.json) return printJson(found);
        printTable(['NODE', 'POOL', 'FREE', 'GPU UUIDS'], found.data.map((n) => [n.node_id, n.pool, n.free_gpu_uuids.length, n.free_gpu_uuids.map(shortUuid).join(' ')]));
      });
    });

  const token = nodes.command('token').description('node enrollment tokens (single use)');
  token
    .command('create')
    .description('make a one-time enrollment token; its value is printed once')
    .option('--pool <pool>', 'the pool nodes enrolled with it join: na, eu or apac (default: the agent says)')
    .option('--ttl <duration>', 'lifetime: 90s, 30m, 24h, 7d (default: SVC_NODE_TOKEN_TTL_SECONDS, 24h)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) => {
      let ttlSeconds: number | undefined;
      if (opts.ttl !== undefined) {
        ttlSeconds = parseTtlSeconds(opts.ttl);
        if (ttlSeconds === undefined) throw new Error(`--ttl ${opts.ttl} is not a duration; use e.g. 90s, 30m, 24h or 7d`);
      }
      await withClient(cmd, async (client) => {
        const view = await client.createToken({ pool: opts.pool, ttlSeconds });
        if (opts.json) return printJson(view);
        say(
          `Created enrollment token ${view.id}${view.pool ? ` for pool ${view.pool}` : ''}, valid until ${view.expires_at}, single use.\n` +
            `The token is shown once; start the agent with:\n  SVC_NODE_TOKEN=${view.token}\n`,
        );
      });
    });
  token
    .command('list')
    .description('enrollment tokens and their state (values are never shown again)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const views = await client.listTokens();
        if (opts.json) return printJson(views);
        printTable(['TOKEN ID', 'POOL', 'STATE', 'EXPIRES', 'USED BY'], views.data.map((v) => [v.id, v.pool ?? 'any', v.state, v.expires_at, v.used_by_node ?? '']));
      }),
    );
  token
    .command('revoke <tokenId>')
    .description('revoke an unused token (idempotent)')
    .option('--json', 'print JSON', false)
    .action(async (id: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const view = await client.revokeToken(id);
        if (opts.json) return printJson(view);
        say(view.state === 'used' ? `${id} was already used by ${view.used_by_node}; nothing to revoke.\n` : `Revoked ${id}.\n`);
      }),
    );

  const gpu = nodes.command('gpu').description('GPU operations');
  gpu
    .command('reset-health <node> [gpu]')
    .description("tell the agent to clear a GPU's unhealthy verdict (GPU uuid, uuid prefix or index; default every GPU)")
    .option('--wait <seconds>', "wait this long for the agent's answer (0: just queue it)", '10')
    .option('--json', 'print JSON', false)
    .action(async (ref: string, gpuRef: string | undefined, opts, cmd: Command) => {
      const waitSeconds = Number(opts.wait);
      if (!Number.isFinite(waitSeconds) || waitSeconds < 0) throw new Error('--wait must be a number of seconds >= 0');
      await withClient(cmd, async (client) => {
        let view = await client.resetGpuHealth(ref, gpuRef);
        const deadline = Date.now() + waitSeconds * 1000;
        while ((view.state === 'pending' || view.state === 'sent') && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 200));
          view = await client.getCommand(view.id);
        }
        if (opts.json) return printJson(view);
        const target = view.gpu_uuid ?? 'every GPU';
        const outcome: Record<typeof view.state, string> = {
          pending: 'queued; the control plane sends it once the node is connected (it must be running)',
          sent: 'sent to the agent; no answer yet',
          succeeded: 'done: the agent cleared the health verdict',
          failed: `failed: ${view.error_code}: ${view.error_message}`,
        };
        say(`Reset health of ${target} on ${view.node_id} (${view.id}): ${outcome[view.state]}.\n`);
        if (view.state === 'failed') process.exitCode = 1;
      });
    });
}

type DetailView = Awaited<ReturnType<OperatorClient['showNode']>>;


function printNodeDetail(v: DetailView, now: number, lastSeenAt: number | null): void {
  const f = v.host_facts ?? {};
  const fact = (key: string): string => dash(f[key] as string | number | undefined);
  const disks = Array.isArray(f.disks)
    ? (f.disks as Array<{ mount: string; size_bytes: number; used_bytes: number }>)
        .map((d) => `${d.mount} ${formatGiB(d.used_bytes)}/${formatGiB(d.size_bytes)} GiB`)
        .join(', ')
    : '-';
  const lines = [
    `Node      ${v.id} (${v.hostname})`,
    `Pool      ${v.pool}`,
    `Status    ${v.status_label}${v.schedulable ? '' : ' (not schedulable)'}`,
    `Last seen ${formatAgo(lastSeenAt, now)}${v.last_seen_at ? ` (${v.last_seen_at})` : ''}`,
    `Agent     ${dash(v.agent_version)} (protocol ${v.protocol_version})`,
    `CPU       ${fact('cpu_model')} (${fact('cpu_cores')} logical / ${fact('cpu_physical_cores')} physical cores)`,
    `Memory    ${typeof f.memory_total_bytes === 'number' ? `${formatGiB(f.memory_total_bytes)} GiB` : '-'}`,
    `Disks     ${disks || '-'}`,
    `OS        ${fact('os')}, kernel ${fact('kernel')}`,
    `Docker    ${fact('docker_version')}${f.nvidia_runtime ? ' (NVIDIA runtime)' : ''}`,
    `NVIDIA    driver ${fact('nvidia_driver_version')}, CUDA ${fact('cuda_version')}${
      f.nvml_available === false ? ` — NVML unavailable: ${fact('nvml_unavailable_reason')}` : ''
    }`,
    `Isolation ${isolationWarnings({ hostFacts: f }).join(', ') || (v.protocol_version >= 7 && typeof f.hostname === 'string' ? 'no warnings' : '-')}`,
    `Clock     ${clockLine(clockOffsetMs({ hostFacts: f }))}`,
    `Access    ${
      typeof f.ssh_port === 'number' && f.ssh_port > 0
        ? `ssh ${fact('public_host')}:${fact('ssh_port')} (host key ${fact('ssh_host_key_fingerprint')}), Jupyter :${fact('jupyter_port')}`
        : '-'
    }`,
    '',
  ];
  say(`${lines.join('\n')}\n`);
  printTable(
    ['#', 'NAME', 'UUID', 'MEM USED/TOTAL GiB', 'UTIL', 'TEMP', 'POWER', 'HEALTH'],
    v.gpus.map((g) => [
      g.index,
      g.name,
      shortUuid(g.uuid),
      `${formatGiB(g.memory_used_bytes)}/${formatGiB(g.memory_total_bytes)}`,
      dash(g.utilization_gpu_percent, '%'),
      dash(g.temperature_c, '°C'),
      g.power_usage_w === null ? '-' : `${Math.round(g.power_usage_w)}${g.power_limit_w === null ? '' : `/${Math.round(g.power_limit_w)}`} W`,
      g.healthy ? 'healthy' : `UNHEALTHY: ${g.health_reason}`,
    ]),
  );
  say('\nRecent health timeline (newest first)\n');
  printTable(
    ['AT', 'EVENT', 'GPU', 'DETAIL'],
    v.timeline.map((e) => [e.at, e.kind, e.gpu_index === null ? '' : String(e.gpu_index), e.message]),
  );
  if (v.pending_commands.length > 0) {
    say('\nCommands waiting for the agent\n');
    printTable(['COMMAND', 'KIND', 'GPU', 'STATE', 'CREATED'], v.pending_commands.map((c) => [c.id, c.kind, c.gpu_uuid ?? 'all', c.state, c.created_at]));
  }
}

/** The node's clock against the control plane's, as `nodes show` says it. */
export function clockLine(offsetMs: number | null): string {
  if (offsetMs === null) return '-';
  if (offsetMs === 0) return "in step with the control plane's (within 1 s)";
  const seconds = (Math.abs(offsetMs) / 1000).toFixed(1);
  return `${seconds} s ${offsetMs > 0 ? 'ahead of' : 'behind'} the control plane's: run NTP on the node (billing reads its times on the control plane's clock)`;
}
