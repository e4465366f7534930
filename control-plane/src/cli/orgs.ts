// svcctl orgs list|show|create|set
import type { Command } from 'commander';
import { orgView } from '../routes/views.js';
import { withContext } from './context.js';
import { printJson, printTable, splitList } from './output.js';


function printOrg(view: ReturnType<typeof orgView>): void {
  printTable(
    ['FIELD', 'VALUE'],
    [
      ['id', view.id],
      ['name', view.name],
      ['tier', view.tier],
      ['ip allowlist', view.ip_allowlist.join(', ') || '(any address)'],
      ['referrer allowlist', view.referrer_allowlist.join(', ') || '(none: public keys refused)'],
      ['models', view.allowed_models?.join(', ') ?? '(all)'],
    ],
  );
}

export function registerOrgCommands(program: Command): void {
  const orgs = program.command('orgs').description('organizations: tier, IP allowlist, referrer allowlist');

  orgs
    .command('list')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const views = (await services.orgs.list()).map(orgView);
        if (opts.json) return printJson({ object: 'list', data: views });
        printTable(
          ['ORG ID', 'NAME', 'TIER', 'IP ALLOWLIST', 'REFERRERS'],
          views.map((v) => [v.id, v.name, v.tier, v.ip_allowlist.join(' ') || 'any', v.referrer_allowlist.join(' ') || '-']),
        );
      }),
    );

  orgs
    .command('show <org>')
    .option('--json', 'print JSON', false)
    .action(async (org: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const view = orgView(await services.orgs.resolve(org));
        return opts.json ? printJson(view) : printOrg(view);
      }),
    );

  orgs
    .command('create <name>')
    .option('--tier <tier>', '2 or 3', '2')
    .option('--json', 'print JSON', false)
    .action(async (name: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const tier = Number(opts.tier);
        if (tier !== 2 && tier !== 3) throw new Error('--tier must be 2 or 3');
        const view = orgView(await services.orgs.create(name, tier));
        return opts.json ? printJson(view) : printOrg(view);
      }),
    );

  orgs
    .command('set <org>')
    .description('change an org; lists are space- or comma-separated, "" clears one')
    .option('--tier <tier>', '2 or 3')
    .option('--ip-allowlist <cidrs>', 'CIDR ranges (IPv4 and IPv6) keys are accepted from')
    .option('--referrer-allowlist <origins>', 'origins public keys may be used from, e.g. https://*.example.com')
    .option('--models <ids>', 'model ids the org may call, or "all"')
    .option('--json', 'print JSON', false)
    .action(async (org: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const target = await services.orgs.resolve(org);
        const updated = await services.orgs.update(target.id, {
          tier: opts.tier === undefined ? undefined : Number(opts.tier),
          ipAllowlist: opts.ipAllowlist === undefined ? undefined : splitList(opts.ipAllowlist),
          referrerAllowlist: opts.referrerAllowlist === undefined ? undefined : splitList(opts.referrerAllowlist),
          allowedModels: opts.models === undefined ? undefined : opts.models === 'all' ? null : splitList(opts.models),
        });
        const view = orgView(updated);
        return opts.json ? printJson(view) : printOrg(view);
      }),
    );
}
