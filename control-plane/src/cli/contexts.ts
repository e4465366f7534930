// svcctl context add|use|list|remove|current: named operator API endpoints with their
// operator keys, kept in the config file (SVC_CONFIG or ~/.config/svcctl/config.json).
import type { Command } from 'commander';
import { addContext, configPath, readConfig, removeContext, useContext, writeConfig } from './config-file.js';
import { printJson, printTable, say } from './output.js';

const masked = (key: string): string => `${key.slice(0, 6)}…${key.slice(-4)}`;

export function registerContextCommands(program: Command): void {
  const context = program.command('context').description('named control planes to talk to remotely (like kubeconfig contexts)');

  context
    .command('add <name>')
    .description('add (or replace) a context; the first one added becomes current')
    .requiredOption('--url <url>', "the control plane's base URL, e.g. https://cp.example.com")
    .option('--key <key>', 'an operator key (svcop_…); default: SVC_OPERATOR_KEY')
    .option('--use', 'make it the current context', false)
    .option('--insecure', 'allow an http:// URL to a host other than loopback (the key travels in cleartext); kept in the context', false)
    .action(async (name: string, opts) => {
      const key = opts.key ?? process.env.SVC_OPERATOR_KEY;
      if (!key) throw new Error('context add needs an operator key: --key or SVC_OPERATOR_KEY');
      const path = configPath();
      const next = addContext(readConfig(path), name, { url: opts.url, key, insecure: opts.insecure === true }, opts.use);
      writeConfig(path, next);
      const insecure = next.contexts[name]!.insecure ? ' (insecure: the key goes over plain http)' : '';
      say(`Context "${name}" points at ${next.contexts[name]!.url}${insecure}${next.current === name ? ' and is current' : ''} (${path}).\n`);
    });

  context
    .command('use <name>')
    .description('make a context current')
    .action(async (name: string) => {
      const path = configPath();
      writeConfig(path, useContext(readConfig(path), name));
      say(`Current context is "${name}".\n`);
    });

  context
    .command('list')
    .description('the contexts (keys masked); * marks the current one')
    .option('--json', 'print JSON', false)
    .action(async (opts) => {
      const config = readConfig(configPath());
      const rows = Object.entries(config.contexts).map(([name, c]) => ({ name, url: c.url, key: masked(c.key), current: config.current === name, insecure: c.insecure === true }));
      if (opts.json) return printJson({ object: 'list', data: rows });
      printTable(['CURRENT', 'NAME', 'URL', 'KEY'], rows.map((r) => [r.current ? '*' : '', r.name, r.insecure ? `${r.url} (insecure)` : r.url, r.key]));
    });

  context
    .command('remove <name>')
    .description('forget a context (and its key)')
    .action(async (name: string) => {
      const path = configPath();
      writeConfig(path, removeContext(readConfig(path), name));
      say(`Removed context "${name}".\n`);
    });
}
