// svcctl: the operator CLI. It works on the local data dir (SVC_DATA_DIR, default ./data).
import { Command, CommanderError } from 'commander';
import { ApiError, ConfigError } from '@svc/shared';
import { registerKeyCommands } from './keys.js';
import { registerInstanceCommands } from './instances.js';
import { registerNodeCommands } from './nodes.js';
import { registerOrgCommands } from './orgs.js';
import { registerReplicaCommands } from './replicas.js';
import { registerWebhookCommands } from './webhooks.js';

export function buildProgram(): Command {
  const program = new Command('svcctl')
    .description('Operate the GPU cloud control plane: keys, orgs, nodes, instances, replicas, webhooks')
    .option('--data-dir <dir>', 'control-plane data directory (default: SVC_DATA_DIR or ./data)')
    .showHelpAfterError()
    .exitOverride();
  registerKeyCommands(program);
  registerOrgCommands(program);
  registerNodeCommands(program);
  registerInstanceCommands(program);
  registerReplicaCommands(program);
  registerWebhookCommands(program);
  return program;
}

export async function runCli(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (err instanceof ConfigError) {
      process.stderr.write(`svcctl: ${err.message}\n`);
      return 2;
    }
    const message = err instanceof ApiError || err instanceof Error ? err.message : String(err);
    process.stderr.write(`svcctl: ${message}\n`);
    return 1;
  }
}

process.exitCode = await runCli(process.argv.slice(2));
