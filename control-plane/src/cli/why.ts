// svcctl why <node | gpu uuid | instance id>: the incident view (control-plane/src/incidents),
// locally or over the operator API; the report is data, rendered here.
import type { Command } from 'commander';
import { renderWhyReport, type WhyReport } from '../incidents/why-report.js';
import { withClient } from './context.js';
import { printJson, say } from './output.js';

export function registerWhyCommand(program: Command): void {
  program
    .command('why')
    .argument('<ref>', 'node id or hostname, GPU UUID (or a unique prefix), or instance id')
    .description('one screen on a fault: the GPU and node, health since when, XID timeline with NVIDIA meaning and action, workloads and orgs, remediation')
    .option('--json', 'print JSON', false)
    .action(async (ref: string, opts: { json: boolean }, cmd: Command) =>
      withClient(cmd, async (client) => {
        const report = (await client.why(ref)) as WhyReport;
        if (opts.json) printJson(report);
        else say(renderWhyReport(report));
      }),
    );
}
