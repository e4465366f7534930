// svcctl keys create|list|rotate|revoke: customer API keys of any org.
import type { Command } from 'commander';
import { DEFAULT_OVERLAP_SECONDS } from '../keys/key-service.js';
import type { KeyKind } from '../store/records.js';
import { withClient } from './context.js';
import { printJson, printTable, say, splitList, wholeNumber } from './output.js';

export function registerKeyCommands(program: Command): void {
  const keys = program.command('keys').description('API keys: create, list, rotate, revoke');

  keys
    .command('create')
    .description('create a key; its value is printed once')
    .option('--kind <kind>', 'live, test or public', 'live')
    .option('--scopes <scopes>', 'space- or comma-separated scopes (default: inference:write inference:read; all for --admin)')
    .option('--admin', 'an admin key (may hold admin:write)', false)
    .option('--org <org>', 'org id or name (default: the first org)')
    .option('--name <name>', 'a label for the key')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const created = await client.createKey({
          org: opts.org,
          kind: opts.kind as KeyKind,
          scopes: opts.scopes ? splitList(opts.scopes) : undefined,
          admin: opts.admin,
          name: opts.name,
        });
        if (opts.json) return printJson(created);
        say(
          `Created ${created.admin ? 'admin ' : ''}key ${created.key_id} (${created.masked}) in org ${created.org_name} with scopes: ${created.scopes.join(' ')}\n` +
            `The key is shown once; store it now:\n${created.key}\n`,
        );
      }),
    );

  keys
    .command('list')
    .description('list keys (prefix and last 4 characters only)')
    .option('--org <org>', 'only this org (id or name)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const views = await client.listKeys(opts.org);
        if (opts.json) return printJson(views);
        printTable(
          ['KEY ID', 'KEY', 'KIND', 'ADMIN', 'SCOPES', 'ORG', 'STATUS', 'NAME'],
          views.data.map((v) => [v.key_id, v.masked, v.kind, v.admin ? 'yes' : '', v.scopes.join(' '), v.org_id, v.revoked ? `revoked ${v.revoked_at}` : 'active', v.name ?? '']),
        );
      }),
    );

  keys
    .command('rotate <keyId>')
    .description('issue a new value; the old one keeps working during the overlap')
    .option('--overlap-seconds <n>', 'seconds both values validate', String(DEFAULT_OVERLAP_SECONDS))
    .option('--json', 'print JSON', false)
    .action(async (keyId: string, opts, cmd: Command) => {
      const overlap = wholeNumber(opts.overlapSeconds, '--overlap-seconds', 0);
      await withClient(cmd, async (client) => {
        const result = await client.rotateKey(keyId, overlap);
        if (opts.json) return printJson(result);
        say(`Rotated ${keyId}. The old value stops working at ${result.old_key_expires_at}.\nNew value (shown once):\n${result.key}\n`);
      });
    });

  keys
    .command('revoke <keyId>')
    .description('revoke a key (idempotent)')
    .option('--json', 'print JSON', false)
    .action(async (keyId: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const result = await client.revokeKey(keyId);
        if (opts.json) return printJson(result);
        say(`Revoked ${result.key_id} at ${result.revoked_at}.\n`);
      }),
    );
}
