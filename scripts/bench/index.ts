// `npm run bench`: runs each benchmark section in order and prints its report.
// Sections are independent; one that fails is reported and the others still run.
import { agentsScaleSection } from './agents-scale.js';
import { inferenceEngineSection } from './inference-engine.js';
import { inferenceOverheadSection } from './inference-overhead.js';
import { inferenceResponsesSection } from './inference-responses.js';
import { inferenceWorkersSection } from './inference-workers.js';
import { instancesSection } from './instances.js';
import { pipelineSection } from './pipeline.js';
import type { Section, SectionReport } from './section.js';
import { whyReportSection } from './why-report.js';

const sections: Section[] = [pipelineSection, agentsScaleSection, instancesSection, inferenceEngineSection, inferenceOverheadSection, inferenceWorkersSection, inferenceResponsesSection, whyReportSection];

// `npm run bench -- <word>` runs only the sections whose title contains it.
const only = process.argv[2]?.toLowerCase();
if (only) sections.splice(0, sections.length, ...sections.filter((s) => s.title.toLowerCase().includes(only)));

async function main(): Promise<void> {
  const summaries: string[] = [];
  let failed = false;
  for (const section of sections) {
    console.log(`\n== ${section.title} ==\n`);
    const started = performance.now();
    let report: SectionReport;
    try {
      report = await section.run();
    } catch (err) {
      failed = true;
      console.log(`ERROR: ${err instanceof Error ? err.message : String(err)}`);
      summaries.push(`ERROR  ${section.title}`);
      continue;
    }
    for (const line of report.details) console.log(line);
    console.log(`\n(${((performance.now() - started) / 1000).toFixed(1)} s)`);
    summaries.push(`${report.verdict.padEnd(5)}  ${section.title}: ${report.summary}`);
  }
  console.log('\n== Summary ==\n');
  for (const line of summaries) console.log(line);
  // A section that could not measure is a failure; a missed target is a finding, reported above.
  if (failed) process.exitCode = 1;
}

await main();
