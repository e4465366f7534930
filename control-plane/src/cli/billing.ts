// svcctl billing show|grant|set: an org's billing account, as the provider runs it.
import type { Command } from 'commander';
import { withClient } from './context.js';
import { printJson, printTable } from './output.js';

const usd = (nanos: number | null): string => (nanos === null ? '(none)' : `$${(nanos / 1e9).toFixed(2)}`);

interface AccountView {
  org_id: string;
  mode: string;
  balance_nanos: number;
  credited_nanos: number;
  spent_nanos: number;
  month_to_date_nanos: number;
  credit_limit_nanos: number | null;
  low_balance_nanos: number | null;
}

function printAccount(account: AccountView): void {
  printTable(
    ['FIELD', 'VALUE'],
    [
      ['org', account.org_id],
      ['mode', account.mode],
      ['balance', usd(account.balance_nanos)],
      ['credited', usd(account.credited_nanos)],
      ['spent', usd(account.spent_nanos)],
      ['month to date', usd(account.month_to_date_nanos)],
      ['credit limit (postpaid)', usd(account.credit_limit_nanos)],
      ['low-balance alert below', usd(account.low_balance_nanos)],
    ],
  );
}

const show = (account: AccountView, json: boolean) => (json ? printJson(account) : printAccount(account));
const orNone = (text: string | undefined): string | null | undefined => (text === undefined ? undefined : text === 'none' ? null : text);

export function registerBillingCommands(program: Command): void {
  const billing = program.command('billing').description("organizations' billing accounts: balance, credit grants, prepaid/postpaid, limits");

  billing
    .command('show <org>')
    .option('--json', 'print JSON', false)
    .action(async (org: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => show(await client.billingAccount(org), opts.json)),
    );

  billing
    .command('grant <org> <usd>')
    .description('add credit to an org (prepaid top-up, goodwill); appended to its ledger')
    .option('--note <text>', 'what the customer sees on the credit line', 'Credit grant')
    .option('--json', 'print JSON', false)
    .action(async (org: string, amount: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => show(await client.grantCredit(org, amount, String(opts.note)), opts.json)),
    );

  billing
    .command('set <org>')
    .description('prepaid orgs spend their balance; postpaid orgs are billed monthly up to a credit limit')
    .option('--mode <mode>', 'prepaid or postpaid')
    .option('--credit-limit <usd>', 'postpaid: the most a month may bill before new work is refused, or "none"')
    .option('--low-balance <usd>', 'send billing.balance_low when the balance falls below this, or "none"')
    .option('--json', 'print JSON', false)
    .action(async (org: string, opts, cmd: Command) =>
      withClient(cmd, async (client) => {
        if (opts.mode !== undefined && opts.mode !== 'prepaid' && opts.mode !== 'postpaid') throw new Error('--mode must be prepaid or postpaid');
        const patch = {
          ...(opts.mode !== undefined ? { mode: opts.mode as 'prepaid' | 'postpaid' } : {}),
          ...(opts.creditLimit !== undefined ? { credit_limit: orNone(opts.creditLimit) } : {}),
          ...(opts.lowBalance !== undefined ? { low_balance: orNone(opts.lowBalance) } : {}),
        };
        return show(await client.configureBilling(org, patch), opts.json);
      }),
    );
}
