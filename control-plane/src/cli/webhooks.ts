// svcctl webhooks list|show|create|delete|rotate-secret|deliveries|redeliver
import type { Command } from 'commander';
import { toRfc3339 } from '@svc/shared';
import { DEFAULT_SECRET_OVERLAP_SECONDS } from '../webhooks/webhook-service.js';
import { deliveryView, webhookView } from '../webhooks/views.js';
import { withContext } from './context.js';
import { printJson, printTable, splitList } from './output.js';


function wholeNumber(text: string, flag: string, min: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`${flag} must be a whole number >= ${min}`);
  return n;
}

export function registerWebhookCommands(program: Command): void {
  const webhooks = program.command('webhooks').description('webhook subscriptions, their secrets and deliveries');

  webhooks
    .command('list')
    .description('list webhooks (no secrets)')
    .option('--org <org>', 'only this org (id or name)')
    .option('--json', 'print JSON', false)
    .action(async (opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const orgId = opts.org ? (await services.orgs.resolve(opts.org)).id : undefined;
        const views = (await services.webhooks.list(orgId)).map(webhookView);
        if (opts.json) return printJson({ object: 'list', data: views });
        printTable(
          ['WEBHOOK ID', 'URL', 'EVENTS', 'STATUS', 'ORG', 'DESCRIPTION'],
          views.map((v) => [v.id, v.url, v.event_types.join(' '), v.status, v.org_id, v.description ?? '']),
        );
      }),
    );

  webhooks
    .command('show <webhookId>')
    .description('show one webhook')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const v = webhookView(await services.webhooks.get(webhookId));
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
      withContext(cmd, async ({ services }) => {
        const org = opts.org ? await services.orgs.resolve(opts.org) : (await services.orgs.ensureDefaultOrg()).org;
        const created = await services.webhooks.create({
          orgId: org.id,
          url: opts.url,
          eventTypes: splitList(opts.events),
          description: opts.description ?? null,
        });
        const v = webhookView(created.subscription);
        if (opts.json) return printJson({ ...v, secret: created.secret });
        process.stdout.write(
          `Created webhook ${v.id} for ${v.url} (${v.event_types.join(' ')}) in org ${org.name}.\n` +
            `Signing secret (shown once; store it now):\n${created.secret}\n`,
        );
      }),
    );

  webhooks
    .command('delete <webhookId>')
    .description('delete a webhook and drop its pending deliveries')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const deleted = await services.webhooks.delete(webhookId);
        if (opts.json) return printJson({ id: deleted.id, object: 'webhook', deleted: true });
        process.stdout.write(`Deleted webhook ${deleted.id} (${deleted.url}).\n`);
      }),
    );

  webhooks
    .command('rotate-secret <webhookId>')
    .description('issue a new signing secret; both sign during the overlap')
    .option('--overlap-seconds <n>', 'seconds the old secret keeps signing', String(DEFAULT_SECRET_OVERLAP_SECONDS))
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const overlap = wholeNumber(opts.overlapSeconds, '--overlap-seconds', 0);
        const rotated = await services.webhooks.rotateSecret(webhookId, overlap);
        const result = { ...webhookView(rotated.subscription), secret: rotated.secret, old_secret_expires_at: toRfc3339(rotated.oldSecretExpiresAt) };
        if (opts.json) return printJson(result);
        process.stdout.write(
          `Rotated the secret of ${webhookId}. The old secret stops signing at ${result.old_secret_expires_at}.\n` +
            `New secret (shown once):\n${rotated.secret}\n`,
        );
      }),
    );

  webhooks
    .command('deliveries <webhookId>')
    .description('recent deliveries and their attempts, newest first')
    .option('--limit <n>', 'how many deliveries', '20')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const limit = wholeNumber(opts.limit, '--limit', 1);
        const views = (await services.webhooks.deliveries(webhookId, { limit })).map(deliveryView);
        if (opts.json) return printJson({ object: 'list', data: views });
        printTable(
          ['DELIVERY ID', 'EVENT', 'TYPE', 'STATUS', 'ATTEMPTS', 'LAST RESULT', 'NEXT ATTEMPT'],
          views.map((v) => {
            const last = v.attempts.at(-1);
            const result = last ? (last.status_code !== null ? `HTTP ${last.status_code}` : (last.error ?? '')) + ` (${last.duration_ms} ms)` : '';
            return [v.id, v.event_id, v.event_type, v.status, v.attempt_count, result, v.next_attempt_at ?? ''];
          }),
        );
      }),
    );

  webhooks
    .command('redeliver <webhookId> <deliveryId>')
    .description('send a delivery again (same webhook-id); a running control plane picks it up')
    .option('--json', 'print JSON', false)
    .action(async (webhookId: string, deliveryId: string, opts, cmd: Command) =>
      withContext(cmd, async ({ services }) => {
        const d = await services.webhooks.redeliver(webhookId, deliveryId);
        const nextAttemptAt = d.nextAttemptAt === null ? null : toRfc3339(d.nextAttemptAt);
        const result = { id: d.id, object: 'webhook.delivery', status: d.status, next_attempt_at: nextAttemptAt };
        if (opts.json) return printJson(result);
        process.stdout.write(`Delivery ${d.id} is pending again; a running control plane sends it within a poll interval.\n`);
      }),
    );
}
