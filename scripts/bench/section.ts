// The contract between the bench runner (index.ts) and its sections. A section measures
// one thing and hands back text to print plus a verdict against its target.

export type Verdict = 'PASS' | 'MISS' | 'INFO';

export interface SectionReport {
  /** One line that states the result, e.g. "pipeline cost 12.3% (target < 20%)". */
  summary: string;
  verdict: Verdict;
  /** Pre-formatted lines (tables, notes) printed under the section title. */
  details: string[];
}

export interface Section {
  title: string;
  run(): Promise<SectionReport>;
}
