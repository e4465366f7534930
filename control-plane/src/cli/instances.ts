// svcctl instances list|show|terminate. `show --watch` draws the image pull as a progress
// bar until the instance is ready (or failed). Terminate records the stop in the data
// dir; the running server delivers it to the node within a second.
import type { Command } from 'commander';
import { instanceView } from '../instances/instance-service.js';
import { INSTANCE_STATUSES, TERMINAL, type InstanceStatus } from '../instances/lifecycle.js';
import type { InstanceRecord } from '../instances/instance-record.js';
import { withContext } from './context.js';
import { printJson, printTable, splitList } from './output.js';


function ago(ms: number | null): string {
  if (ms === null) return '-';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.floor(s / 60)}m ago` : `${Math.floor(s / 3600)}h ago`;
}

/** `[#########-----------]  45%  pulling`: the pull as a terminal progress bar. */
export function progressBar(fraction: number | null, phase: string, width = 30): string {
  if (fraction === null) return `[${'?'.repeat(width)}]  ${phase}`;
  const done = Math.round(Math.min(1, Math.max(0, fraction)) * width);
  return `[${'#'.repeat(done)}${'-'.repeat(width - done)}] ${String(Math.round(fraction * 100)).padStart(3)}%  ${phase}`;
}

function printInstance(r: InstanceRecord): void {
  const v = instanceView(r);
  printTable(
    ['FIELD', 'VALUE'],
    [
      ['id', v.id],
      ['status', v.status + (v.failure_reason ? ` (${v.failure_reason})` : '')],
      ['sku', `${v.gpus} x ${v.sku}`],
      ['pool / node', `${v.pool} / ${v.node_id ?? '-'}`],
      ['mode', v.mode === 'reserved' ? `reserved ${v.duration_hours} h, expires ${v.expires_at}` : 'on demand'],
      ['image', v.image],
      ['price', `$${v.price.per_hour.toFixed(2)}/h ($${v.price.per_gpu_hour}/GPU-h)`],
      ['created', v.created_at ?? '-'],
      ['ready', v.ready_at ?? '-'],
      ['terminated', v.terminated_at ?? '-'],
      ['labels', Object.entries(v.labels).map(([k, val]) => `${k}=${val}`).join(' ') || '-'],
      ...(r.progress ? [['progress', progressBar(r.progress.fraction, r.progress.phase)]] : []),
      ...(v.ssh ? [['ssh', v.ssh.command], ['ssh host key', v.ssh.host_key_fingerprint]] : []),
      ...(v.jupyter ? [['jupyter', v.jupyter.url]] : v.jupyter_unavailable_reason ? [['jupyter', `none: ${v.jupyter_unavailable_reason}`]] : []),
    ],
  );
}

export function registerInstanceCommands(program: Command): void {
  const instances = program.command('instances').description('GPU instances: list, show, terminate');

  instances
    .command('list')
    .option('--org <org>', 'org id or name (default: every org)')
    .option('--status <statuses>', `comma-separated: ${INSTANCE_STATUSES.join(', ')}`)
    .option('--limit <n>', 'how many', '50')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withContext(cmd, async ({ services, store }) => {
        const statuses = opts.status ? (splitList(opts.status) as InstanceStatus[]) : undefined;
        const bad = statuses?.find((s) => !(INSTANCE_STATUSES as readonly string[]).includes(s));
        if (bad) throw new Error(`unknown status "${bad}"; statuses are: ${INSTANCE_STATUSES.join(', ')}`);
        const orgs = opts.org ? [await services.orgs.resolve(opts.org)] : await services.orgs.list();
        const rows: InstanceRecord[] = [];
        for (const org of orgs) rows.push(...(await store.instances.list(org.id, { statuses, limit: Number(opts.limit) })).data);
        if (opts.json) return printJson({ object: 'list', data: rows.map((r) => instanceView(r)) });
        printTable(
          ['INSTANCE', 'STATUS', 'SKU', 'POOL', 'NODE', 'MODE', 'CREATED', 'PROGRESS'],
          rows.map((r) => [
            r.id,
            r.status + (r.failureReason ? `: ${r.failureReason}` : ''),
            `${r.gpus} x ${r.sku}`,
            r.pool,
            r.nodeId ?? '-',
            r.mode === 'reserved' ? `reserved ${r.durationHours}h` : 'on demand',
            ago(r.createdAt),
            r.progress ? progressBar(r.progress.fraction, r.progress.phase, 12) : '',
          ]),
        );
      }),
    );

  instances
    .command('show <id>')
    .option('--watch', 'follow the instance until it is ready or ends, with a pull progress bar', false)
    .option('--json', 'print JSON', false)
    .action(async (id: string, opts, cmd: Command) =>
      withContext(cmd, async ({ store }) => {
        const load = async (): Promise<InstanceRecord> => {
          const record = await store.instances.get(id);
          if (!record) throw new Error(`no instance with id ${id}`);
          return record;
        };
        let record = await load();
        if (opts.watch) {
          const tty = process.stdout.isTTY;
          while (record.status === 'provisioning' || record.status === 'starting') {
            const line = `${record.status.padEnd(12)} ${progressBar(record.progress?.fraction ?? null, record.progress?.phase ?? record.status)}`;
            process.stdout.write(tty ? `\r${line}` : `${line}\n`);
            await new Promise((r) => setTimeout(r, 250));
            record = await load();
          }
          if (tty) process.stdout.write('\n');
        }
        if (opts.json) return printJson(instanceView(record));
        printInstance(record);
        if (opts.watch && TERMINAL.has(record.status)) process.exitCode = record.status === 'failed' ? 1 : 0;
      }),
    );

  instances
    .command('terminate <id>')
    .description('graceful: SIGTERM, up to the grace (60 s), then SIGKILL; --force skips the grace')
    .option('--force', 'skip the grace', false)
    .option('--json', 'print JSON', false)
    .action(async (id: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services, store }) => {
        const record = await store.instances.get(id);
        if (!record) throw new Error(`no instance with id ${id}`);
        const updated = await services.instances.terminate(record.orgId, id, opts.force);
        if (opts.json) return printJson(instanceView(updated));
        process.stdout.write(`${id} is ${updated.status}${updated.stop && updated.stop.sentAt == null ? '; the server delivers the stop to the node' : ''}.\n`);
      }),
    );
}
