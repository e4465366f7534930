// Orders test files for two workers: slow files first, so the run does not end with one
// worker on a long end-to-end file while the other is idle. With timings from an earlier
// run (vitest's cache), the longest run first, as vitest does. Without them (a clean CI
// checkout), vitest would go by file size, which puts a short file with a long wait (the
// 65 s grace of test/billing.e2e.test.ts) last; here end-to-end suites (real processes,
// Docker) come before the rest, each group by size.
import { statSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const weight = (file: string): number => (/\/test\/[^/]+\.e2e\.test\.ts$/.test(file) ? 2 : /\/test\//.test(file) ? 1 : 0);

export default class E2eFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cached = files.every((f) => this.ctx.cache.getFileTestResults(`${f.project.name}:${relative(this.ctx.config.root, f.moduleId)}`));
    if (cached) return super.sort(files);
    const size = (file: string): number => statSync(file).size;
    return [...files].sort((a, b) => weight(b.moduleId) - weight(a.moduleId) || size(b.moduleId) - size(a.moduleId));
  }
}
