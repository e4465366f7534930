// svcctl instances list|show|terminate, across orgs. `show --watch` draws the image pull
// as a progress bar until the instance is ready (or failed), polling the client, so it
// works the same on the data dir and over the operator API.
import type { Command } from 'commander';
import { INSTANCE_STATUSES, TERMINAL, type InstanceStatus } from '../instances/lifecycle.js';
import type { OperatorClient } from '../operators/fleet-operations.js';
import { withClient } from './context.js';
import { agoFrom, inert, printJson, printTable, say, splitList, wholeNumber } from './output.js';

type InstanceView = Awaited<ReturnType<OperatorClient['showInstance']>>;

/**
 * `[#########-----------]  45%  pulling`: the pull as a terminal progress bar. An unknown
 * fraction (null, or not a finite number) draws `?`; one outside 0..1 is clamped, bar and
 * percentage alike.
 */
export function progressBar(fraction: number | null, phase: string, width = 30): string {
  if (fraction === null || !Number.isFinite(fraction)) return `[${'?'.repeat(width)}]  ${phase}`;
  const clamped = Math.min(1, Math.max(0, fraction));
  const done = Math.round(clamped * width);
  return `[${'#'.repeat(done)}${'-'.repeat(width - done)}] ${String(Math.round(clamped * 100)).padStart(3)}%  ${phase}`;
}

function printInstance(v: InstanceView): void {
  printTable(
    ['FIELD', 'VALUE'],
    [
      ['id', v.id],
      ['org', v.org_id],
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
      ...(v.progress ? [['progress', progressBar(v.progress.fraction, v.progress.phase)]] : []),
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
    .action(async (opts, cmd: Command) => {
      const statuses = opts.status ? (splitList(opts.status) as InstanceStatus[]) : undefined;
      const bad = statuses?.find((s) => !(INSTANCE_STATUSES as readonly string[]).includes(s));
      if (bad) throw new Error(`unknown status "${bad}"; statuses are: ${INSTANCE_STATUSES.join(', ')}`);
      const limit = wholeNumber(opts.limit, '--limit', 1);
      await withClient(cmd, async (client) => {
        const rows = await client.listInstances({ org: opts.org, statuses, limit });
        if (opts.json) return printJson(rows);
        const now = Date.now();
        printTable(
          ['INSTANCE', 'ORG', 'STATUS', 'SKU', 'POOL', 'NODE', 'MODE', 'CREATED', 'PROGRESS'],
          rows.data.map((r) => [
            r.id,
            r.org_id,
            r.status + (r.failure_reason ? `: ${r.failure_reason}` : ''),
            `${r.gpus} x ${r.sku}`,
            r.pool,
            r.node_id ?? '-',
            r.mode === 'reserved' ? `reserved ${r.duration_hours}h` : 'on demand',
            agoFrom(r.created_at, now),
            r.progress ? progressBar(r.progress.fraction, r.progress.phase, 12) : '',
          ]),
        );
      });
    });

  instances
    .command('show <id>')
    .option('--watch', 'follow the instance until it is ready or ends, with a pull progress bar', false)
    .option('--json', 'print JSON', false)
    .action(async (id: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        let view = await client.showInstance(id);
        if (opts.watch) {
          const tty = process.stdout.isTTY;
          while (view.status === 'provisioning' || view.status === 'starting') {
            const line = `${view.status.padEnd(12)} ${progressBar(view.progress?.fraction ?? null, view.progress?.phase ?? view.status)}`;
            // The carriage return redraws the line in place; the line itself is made inert.
            process.stdout.write(tty ? `\r${inert(line)}` : `${inert(line)}\n`);
            await new Promise((r) => setTimeout(r, 250));
            view = await client.showInstance(id);
          }
          if (tty) say('\n');
        }
        if (opts.json) printJson(view);
        else printInstance(view);
        if (opts.watch && TERMINAL.has(view.status)) process.exitCode = view.status === 'failed' ? 1 : 0;
      }),
    );

  instances
    .command('terminate <id>')
    .description('graceful: SIGTERM, up to the grace (60 s), then SIGKILL; --force skips the grace')
    .option('--force', 'skip the grace', false)
    .option('--json', 'print JSON', false)
    .action(async (id: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const updated = await client.terminateInstance(id, opts.force);
        if (opts.json) return printJson(updated);
        say(`${id} is ${updated.status}${updated.stop_pending_delivery ? '; the server delivers the stop to the node' : ''}.\n`);
      }),
    );
}
