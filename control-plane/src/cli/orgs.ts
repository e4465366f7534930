// svcctl orgs list|show|create|set
import type { Command } from 'commander';
import type { orgView } from '../routes/views.js';
import { withClient } from './context.js';
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
      ['gpu quota', view.gpu_quota ?? '(the default, SVC_ORG_MAX_GPUS)'],
    ],
  );
}

function gpuQuota(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n)) throw new Error('--gpu-quota must be a whole number of GPUs, or "default"');
  return n;
}

export function registerOrgCommands(program: Command): void {
  const orgs = program.command('orgs').description('organizations: tier, IP allowlist, referrer allowlist, GPU quota');

  orgs
    .command('list')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const views = await client.listOrgs();
        if (opts.json) return printJson(views);
        printTable(
          ['ORG ID', 'NAME', 'TIER', 'IP ALLOWLIST', 'REFERRERS'],
          views.data.map((v) => [v.id, v.name, v.tier, v.ip_allowlist.join(' ') || 'any', v.referrer_allowlist.join(' ') || '-']),
        );
      }),
    );

  orgs
    .command('show <org>')
    .option('--json', 'print JSON', false)
    .action(async (org: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const view = await client.showOrg(org);
        return opts.json ? printJson(view) : printOrg(view);
      }),
    );

  orgs
    .command('create <name>')
    .option('--tier <tier>', '2 or 3', '2')
    .option('--json', 'print JSON', false)
    .action(async (name: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const tier = Number(opts.tier);
        if (tier !== 2 && tier !== 3) throw new Error('--tier must be 2 or 3');
        const view = await client.createOrg(name, tier);
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
    .option('--gpu-quota <n>', 'GPUs its instances may hold at once, or "default" (SVC_ORG_MAX_GPUS)')
    .option('--json', 'print JSON', false)
    .action(async (org: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const tier = opts.tier === undefined ? undefined : Number(opts.tier);
        if (tier !== undefined && tier !== 2 && tier !== 3) throw new Error('--tier must be 2 or 3');
        const view = await client.updateOrg(org, {
          tier,
          ip_allowlist: opts.ipAllowlist === undefined ? undefined : splitList(opts.ipAllowlist),
          referrer_allowlist: opts.referrerAllowlist === undefined ? undefined : splitList(opts.referrerAllowlist),
          allowed_models: opts.models === undefined ? undefined : opts.models === 'all' ? null : splitList(opts.models),
          gpu_quota: opts.gpuQuota === undefined ? undefined : opts.gpuQuota === 'default' ? null : gpuQuota(opts.gpuQuota),
        });
        return opts.json ? printJson(view) : printOrg(view);
      }),
    );
}
