// svcctl keys create|list|rotate|revoke
import type { Command } from 'commander';
import { toRfc3339 } from '@svc/shared';
import { DEFAULT_OVERLAP_SECONDS } from '../keys/key-service.js';
import type { KeyKind } from '../store/records.js';
import { keyView } from '../routes/views.js';
import { withContext } from './context.js';
import { printJson, printTable, splitList } from './output.js';


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
      withContext(cmd, async ({ services }) => {
        const org = opts.org ? await services.orgs.resolve(opts.org) : (await services.orgs.ensureDefaultOrg()).org;
        const created = await services.keys.create({
          orgId: org.id,
          kind: opts.kind as KeyKind,
          scopes: opts.scopes ? splitList(opts.scopes) : undefined,
          admin: opts.admin,
          name: opts.name ?? null,
        });
        if (opts.json) return printJson({ ...keyView(created.record), key: created.value });
        const v = keyView(created.record);
        process.stdout.write(
          `Created ${v.admin ? 'admin ' : ''}key ${v.key_id} (${v.masked}) in org ${org.name} with scopes: ${v.scopes.join(' ')}\n` +
            `The key is shown once; store it now:\n${created.value}\n`,
        );
      }),
    );

  keys
    .command('list')
    .description('list keys (prefix and last 4 characters only)')
    .option('--org <org>', 'only this org (id or name)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const orgId = opts.org ? (await services.orgs.resolve(opts.org)).id : undefined;
        const views = (await services.keys.list(orgId)).map(keyView);
        if (opts.json) return printJson({ object: 'list', data: views });
        printTable(
          ['KEY ID', 'KEY', 'KIND', 'ADMIN', 'SCOPES', 'ORG', 'STATUS', 'NAME'],
          views.map((v) => [v.key_id, v.masked, v.kind, v.admin ? 'yes' : '', v.scopes.join(' '), v.org_id, v.revoked ? `revoked ${v.revoked_at}` : 'active', v.name ?? '']),
        );
      }),
    );

  keys
    .command('rotate <keyId>')
    .description('issue a new value; the old one keeps working during the overlap')
    .option('--overlap-seconds <n>', 'seconds both values validate', String(DEFAULT_OVERLAP_SECONDS))
    .option('--json', 'print JSON', false)
    .action(async (keyId: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const overlap = Number(opts.overlapSeconds);
        if (!Number.isInteger(overlap) || overlap < 0) throw new Error('--overlap-seconds must be a whole number >= 0');
        const rotated = await services.keys.rotate(keyId, overlap);
        const result = { ...keyView(rotated.record), key: rotated.value, old_key_expires_at: toRfc3339(rotated.oldKeyExpiresAt) };
        if (opts.json) return printJson(result);
        process.stdout.write(
          `Rotated ${keyId}. The old value stops working at ${result.old_key_expires_at}.\n` +
            `New value (shown once):\n${rotated.value}\n`,
        );
      }),
    );

  keys
    .command('revoke <keyId>')
    .description('revoke a key (idempotent)')
    .option('--json', 'print JSON', false)
    .action(async (keyId: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const key = await services.keys.revoke(keyId);
        const result = { key_id: key.id, revoked: true, revoked_at: toRfc3339(key.revokedAt!) };
        if (opts.json) return printJson(result);
        process.stdout.write(`Revoked ${key.id} at ${result.revoked_at}.\n`);
      }),
    );
}
