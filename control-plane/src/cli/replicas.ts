// svcctl replicas list: the model-server replicas the control plane placed, with what
// their agents last reported (status, endpoint, restarts).
import type { Command } from 'commander';
import { systemClock } from '@svc/shared/clock';
import { formatAgo } from '../nodes/views.js';
import { withClient } from './context.js';
import { printJson, printTable, wholeNumber } from './output.js';

export function registerReplicaCommands(program: Command): void {
  const replicas = program.command('replicas').description('model-server replicas: list');

  replicas
    .command('list')
    .description('replicas with model, quantization, pool, node, status, endpoint, restarts and last change')
    .option('--all', 'include stopped and lost replicas', false)
    .option('--limit <n>', 'how many', '100')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) => {
      const limit = wholeNumber(opts.limit, '--limit', 1);
      await withClient(cmd, async (client) => {
        const list = await client.listReplicas({ all: opts.all, limit });
        if (opts.json) return printJson(list);
        const now = systemClock.now();
        printTable(
          ['REPLICA', 'MODEL', 'QUANTIZATION', 'POOL', 'NODE', 'STATUS', 'ENDPOINT', 'RESTARTS', 'LAST CHANGE'],
          list.data.map((r) => [
            r.id,
            r.model,
            r.quantization,
            r.pool,
            r.node_id,
            r.status + (r.message && r.status !== 'running' ? `: ${r.message}` : ''),
            r.endpoint ?? '-',
            r.restarts,
            formatAgo(r.changed_at === null ? null : Date.parse(r.changed_at), now),
          ]),
        );
      });
    });
}
