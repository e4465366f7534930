// svcctl replicas list: the model-server replicas the control plane placed, with what
// their agents last reported (status, endpoint, restarts). Read from the data dir's
// store, which the running server updates on every report.
import type { Command } from 'commander';
import { systemClock } from '@svc/shared';
import { formatAgo } from '../nodes/views.js';
import { replicaView } from '../replicas/views.js';
import { withContext } from './context.js';
import { printJson, printTable } from './output.js';

export function registerReplicaCommands(program: Command): void {
  const replicas = program.command('replicas').description('model-server replicas: list');

  replicas
    .command('list')
    .description('replicas with model, quantization, pool, node, status, endpoint, restarts and last change')
    .option('--all', 'include stopped and lost replicas', false)
    .option('--limit <n>', 'how many', '100')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1) throw new Error('--limit must be a whole number >= 1');
        const list = await services.replicas.list({ includeEnded: opts.all, limit });
        if (opts.json) return printJson({ object: 'list', data: list.map(replicaView) });
        const now = systemClock.now();
        printTable(
          ['REPLICA', 'MODEL', 'QUANTIZATION', 'POOL', 'NODE', 'STATUS', 'ENDPOINT', 'RESTARTS', 'LAST CHANGE'],
          list.map((r) => [
            r.id,
            r.model,
            r.quantization,
            r.pool,
            r.nodeId,
            r.status + (r.message && r.status !== 'running' ? `: ${r.message}` : ''),
            r.endpoint ?? '-',
            r.restarts,
            formatAgo(r.changedAt, now),
          ]),
        );
      }),
    );
}
