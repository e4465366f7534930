// svcctl's commands and how a run ends (exit code, message on stderr). Each command runs
// remotely over the operator API (--url/--key, SVC_URL and SVC_OPERATOR_KEY, or a named
// context) or on the local data dir (SVC_DATA_DIR, default ./data) on the control-plane
// host; cli/context.ts says which applies.
import { Command, CommanderError } from 'commander';
import { ApiError, ConfigError } from '@svc/shared/errors';
import { registerKeyCommands } from './keys.js';
import { registerInstanceCommands } from './instances.js';
import { registerNodeCommands } from './nodes.js';
import { registerOrgCommands } from './orgs.js';
import { registerReplicaCommands } from './replicas.js';
import { registerWebhookCommands } from './webhooks.js';
import { registerOperatorCommands } from './operators.js';
import { registerContextCommands } from './contexts.js';
import { registerBillingCommands } from './billing.js';
import { registerWhyCommand } from './why.js';
import { complain } from './output.js';

export function buildProgram(): Command {
  const program = new Command('svcctl')
    .description('Operate the GPU cloud control plane: keys, orgs, nodes, instances, replicas, webhooks, operator keys')
    .option('--url <url>', 'operator API of a control plane (default: SVC_URL, or the current context)')
    .option('--key <key>', 'operator key for --url (default: SVC_OPERATOR_KEY)')
    .option('--context <name>', 'a context from the config file (svcctl context list)')
    .option('--data-dir <dir>', 'work on this data directory on the control-plane host (default: SVC_DATA_DIR or ./data)')
    .option('--insecure', 'allow an http:// URL to a host other than loopback: the operator key travels in cleartext', false)
    // Global options go before the command (`svcctl --url U nodes list`): `webhooks create
    // --url` and `context add --url` have their own.
    .enablePositionalOptions()
    .showHelpAfterError()
    .exitOverride();
  registerKeyCommands(program);
  registerOrgCommands(program);
  registerNodeCommands(program);
  registerInstanceCommands(program);
  registerReplicaCommands(program);
  registerWebhookCommands(program);
  registerOperatorCommands(program);
  registerContextCommands(program);
  registerBillingCommands(program);
  registerWhyCommand(program);
  return program;
}

export async function runCli(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (err instanceof ConfigError) {
      complain(`svcctl: ${err.message}\n`);
      return 2;
    }
    const message = err instanceof ApiError || err instanceof Error ? err.message : String(err);
    complain(`svcctl: ${message}\n`);
    return 1;
  }
}

