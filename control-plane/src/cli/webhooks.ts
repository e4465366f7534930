// svcctl webhooks list|show|create|delete|rotate-secret|deliveries|redeliver
import type { Command } from 'commander';
import { toRfc3339 } from '@svc/shared/clock';
import { DEFAULT_SECRET_OVERLAP_SECONDS } from '../webhooks/webhook-service.js';
import { withClient } from './context.js';
import { printJson, printTable, say, splitList, wholeNumber } from './output.js';


export function registerWebhookCommands(program: Command): void {
  const webhooks = program.command('webhooks').description('webhook subscriptions, their secrets and deliveries');

  webhooks
    .command('list')
    .description('list webhooks (no secrets)')
    .option('--org <org>', 'only this org (id or name)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const views = await client.listWebhooks(opts.org);
        if (opts.json) return printJson(views);
        printTable(
          ['WEBHOOK ID', 'URL', 'EVENTS', 'STATUS', 'ORG', 'DESCRIPTION'],
          views.data.map((v) => [v.id, v.url, v.event_types.join(' '), v.status, v.org_id, v.description ?? '']),
        );
      }),
    );

  webhooks
    .command('show <webhookId>')
    .description('show one webhook')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const v = await client.showWebhook(webhookId);
        if (opts.json) return printJson(v);
        printTable(
          ['FIELD', 'VALUE'],
          [
            ['id', v.id],
            ['url', v.url],
            ['events', v.event_types.join(' ')],
            ['status', v.disabled_reason ? `${v.status} (${v.disabled_reason})` : v.status],
            ['org', v.org_id],
            ['description', v.description ?? ''],
            ['created', toRfc3339(v.created * 1000)],
          ],
        );
      }),
    );

  webhooks
    .command('create')
    .description('subscribe a URL to events; the signing secret is printed once')
    .requiredOption('--url <url>', 'https URL (plain http only to loopback in development mode)')
    .option('--events <types>', 'space- or comma-separated event types, or "*" for all', '*')
    .option('--description <text>', 'a label for the webhook')
    .option('--org <org>', 'org id or name (default: the first org)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const v = await client.createWebhook({ org: opts.org, url: opts.url, eventTypes: splitList(opts.events), description: opts.description });
        if (opts.json) return printJson(v);
        say(
          `Created webhook ${v.id} for ${v.url} (${v.event_types.join(' ')}) in org ${v.org_name}.\n` +
            `Signing secret (shown once; store it now):\n${v.secret}\n`,
        );
      }),
    );

  webhooks
    .command('delete <webhookId>')
    .description('delete a webhook and drop its pending deliveries')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const deleted = await client.deleteWebhook(webhookId);
        if (opts.json) return printJson(deleted);
        say(`Deleted webhook ${deleted.id} (${deleted.url}).\n`);
      }),
    );

  webhooks
    .command('rotate-secret <webhookId>')
    .description('issue a new signing secret; both sign during the overlap')
    .option('--overlap-seconds <n>', 'seconds the old secret keeps signing', String(DEFAULT_SECRET_OVERLAP_SECONDS))
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) => {
      const overlap = wholeNumber(opts.overlapSeconds, '--overlap-seconds', 0);
      await withClient(cmd, async (client) => {
        const result = await client.rotateWebhookSecret(webhookId, overlap);
        if (opts.json) return printJson(result);
        say(
          `Rotated the secret of ${webhookId}. The old secret stops signing at ${result.old_secret_expires_at}.\n` +
            `New secret (shown once):\n${result.secret}\n`,
        );
      });
    });

  webhooks
    .command('deliveries <webhookId>')
    .description('recent deliveries and their attempts, newest first')
    .option('--limit <n>', 'how many deliveries', '20')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) => {
      const limit = wholeNumber(opts.limit, '--limit', 1);
      await withClient(cmd, async (client) => {
        const views = await client.listDeliveries(webhookId, limit);
        if (opts.json) return printJson(views);
        printTable(
          ['DELIVERY ID', 'EVENT', 'TYPE', 'STATUS', 'ATTEMPTS', 'LAST RESULT', 'NEXT ATTEMPT'],
          views.data.map((v) => {
            const last = v.attempts.at(-1);
            const result = last ? (last.status_code !== null ? `HTTP ${last.status_code}` : (last.error ?? '')) + ` (${last.duration_ms} ms)` : '';
            return [v.id, v.event_id, v.event_type, v.status, v.attempt_count, result, v.next_attempt_at ?? ''];
          }),
        );
      });
    });

  webhooks
    .command('redeliver <webhookId> <deliveryId>')
    .description('send a delivery again (same webhook-id); a running control plane picks it up')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, deliveryId: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        const result = await client.redeliver(webhookId, deliveryId);
        if (opts.json) return printJson(result);
        say(`Delivery ${result.id} is pending again; a running control plane sends it within a poll interval.\n`);
      }),
    );
}
