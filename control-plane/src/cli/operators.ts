// svcctl operators keys create|list|revoke and svcctl operators audit. The first operator
// key is made on the control-plane host (local mode, on the data dir); later ones can be
// made remotely with an operator:write key.
import type { Command } from 'commander';
import { OPERATOR_SCOPES } from '../operators/operator-key.js';
import { withClient } from './context.js';
import { printJson, printTable, say, splitList, wholeNumber } from './output.js';

export function registerOperatorCommands(program: Command): void {
  const operators = program.command('operators').description('operator identity: operator keys and the audit trail of their changes');
  const keys = operators.command('keys').description('operator keys (svcop_): create, list, revoke');

  keys
    .command('create')
    .description('create an operator key; its value is printed once')
    .requiredOption('--scope <scopes>', `space- or comma-separated: ${OPERATOR_SCOPES.join(', ')} (operator:write includes read)`)
    .option('--name <name>', 'who or what holds it, e.g. "alice laptop"')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const created = await client.createOperatorKey({ scopes: splitList(opts.scope), name: opts.name });
        if (opts.json) return printJson(created);
        say(
          `Created operator key ${created.id} (${created.masked}) with scopes: ${created.scopes.join(' ')}\n` +
            `The key is shown once; store it now:\n${created.key}\n` +
            `Use it from a laptop: svcctl context add <name> --url <control-plane URL> --key <the key>\n`,
        );
      }),
    );

  keys
    .command('list')
    .description('operator keys (last 4 characters only)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const views = await client.listOperatorKeys();
        if (opts.json) return printJson(views);
        printTable(
          ['OPERATOR KEY ID', 'KEY', 'SCOPES', 'NAME', 'CREATED', 'CREATED BY', 'STATUS'],
          views.data.map((v) => [v.id, v.masked, v.scopes.join(' '), v.name ?? '', v.created_at, v.created_by, v.revoked ? `revoked ${v.revoked_at}` : 'active']),
        );
      }),
    );

  keys
    .command('revoke <operatorKeyId>')
    .description('revoke an operator key at once (idempotent)')
    .option('--json', 'print JSON', false)
    .action(async (id: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const view = await client.revokeOperatorKey(id);
        if (opts.json) return printJson(view);
        say(`Revoked operator key ${view.id} at ${view.revoked_at}.\n`);
      }),
    );

  operators
    .command('audit')
    .description('what operators changed, newest first, naming the operator key (or "local" for svcctl on the data dir)')
    .option('--limit <n>', 'how many entries', '50')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) => {
      const limit = wholeNumber(opts.limit, '--limit', 1);
      await withClient(cmd, async (client) => {
        const entries = await client.listAudit(limit);
        if (opts.json) return printJson(entries);
        printTable(['AT', 'ACTOR', 'ACTION', 'TARGET', 'DETAIL'], entries.data.map((e) => [e.at, e.actor, e.action, e.target ?? '', JSON.stringify(e.detail)]));
      });
    });
}
