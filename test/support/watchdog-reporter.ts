// A vitest reporter that turns a hung test file into a failed run with a diagnosis.
// Every test and hook has a timeout, but a worker whose event loop is blocked (a
// synchronous call that never returns) or that stops answering vitest never reaches one,
// and the run would then sit until CI's own limit, printing nothing about why. When a
// file has run for longer than any file should, this prints which file and test it is,
// the process tree, the host's firewall rules and containers, then ends the run with
// exit code 1.
//
// It also covers a hang seen once in CI: every file had reported its result, but vitest
// never finished the run (a worker that never said it was done, so no summary and no
// exit, until CI's limit). When every file has ended and the run has not within
// RUN_END_GRACE_MS, this prints the results it saw and the processes still alive, then
// exits: 1 if any file failed, 0 if all passed.
import { execFileSync } from 'node:child_process';
import type { Reporter, TestCase, TestModule, TestSpecification } from 'vitest/node';

/** No file here takes more than about 5 minutes on a loaded 2-core host. */
const FILE_LIMIT_MS = Number(process.env.SVC_TEST_FILE_LIMIT_MS ?? 15 * 60_000);
const CHECK_EVERY_MS = 30_000;
const RUN_END_GRACE_MS = Number(process.env.SVC_TEST_RUN_END_GRACE_MS ?? 120_000);

function shell(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    return `(${command} ${args.join(' ')}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)})`;
  }
}

/** Ends vitest's own worker processes (and what they started in their process group) before exiting. */
function exitEndingWorkers(code: number): never {
  const children = shell('ps', ['--ppid', String(process.pid), '-o', 'pid=']).split('\n').map((l) => Number(l.trim())).filter((pid) => pid > 0);
  for (const pid of children) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  process.exit(code);
}

export default class WatchdogReporter implements Reporter {
  private readonly running = new Map<string, { since: number; test: string }>();
  private readonly ended = new Map<string, string>();
  private expected = Infinity;
  private allEndedAt: number | null = null;
  private timer: NodeJS.Timeout | undefined;

  onInit(): void {
    this.timer = setInterval(() => this.check(), CHECK_EVERY_MS);
    this.timer.unref();
  }

  onTestModuleStart(module: TestModule): void {
    this.running.set(module.moduleId, { since: Date.now(), test: '(collecting)' });
  }

  onTestCaseReady(test: TestCase): void {
    const entry = this.running.get(test.module.moduleId);
    if (entry) entry.test = test.fullName;
  }

  onTestRunStart(specifications: ReadonlyArray<TestSpecification>): void {
    this.expected = new Set(specifications.map((s) => s.moduleId)).size;
  }

  onTestModuleEnd(module: TestModule): void {
    this.running.delete(module.moduleId);
    this.ended.set(module.moduleId, module.state());
    if (this.ended.size >= this.expected) this.allEndedAt ??= Date.now();
  }

  onTestRunEnd(): void {
    clearInterval(this.timer);
  }

  private check(): void {
    const now = Date.now();
    if (this.allEndedAt !== null && now - this.allEndedAt > RUN_END_GRACE_MS) return this.runDidNotEnd();
    const hung = [...this.running].filter(([, r]) => now - r.since > FILE_LIMIT_MS);
    if (hung.length === 0) return;
    const lines = [
      '',
      `WATCHDOG: a test file has run for more than ${FILE_LIMIT_MS / 60_000} minutes; ending the run.`,
      ...hung.map(([file, r]) => `  ${file}: ${((now - r.since) / 60_000).toFixed(1)} min, last test started: ${r.test}`),
      `  other files running: ${[...this.running.keys()].filter((f) => !hung.some(([h]) => h === f)).join(', ') || 'none'}`,
      '--- processes ---',
      shell('ps', ['-eo', 'pid,ppid,pgid,stat,etimes,args', '--sort=start_time']).slice(-12_000),
      '--- iptables -S ---',
      shell('iptables', ['-S']),
      '--- docker ps ---',
      shell('docker', ['ps', '--format', '{{.Names}} {{.Status}} {{.Image}}']),
      '--- memory and disk ---',
      shell('free', ['-m']),
      shell('df', ['-h', '/', '/tmp']),
    ];
    process.stderr.write(`${lines.join('\n')}\n`);
    exitEndingWorkers(1);
  }

  private runDidNotEnd(): void {
    const failed = [...this.ended].filter(([, state]) => state !== 'passed' && state !== 'skipped');
    const lines = [
      '',
      `WATCHDOG: all ${this.ended.size} test files ended ${RUN_END_GRACE_MS / 1000} s ago, but vitest has not finished the run (a worker that never reported it was done).`,
      failed.length === 0 ? `  every file passed.` : `  files that did not pass: ${failed.map(([f, s]) => `${f} (${s})`).join(', ')}`,
      '--- processes still alive ---',
      shell('ps', ['-eo', 'pid,ppid,pgid,stat,etimes,wchan:20,args', '--sort=start_time']).slice(-12_000),
    ];
    process.stderr.write(`${lines.join('\n')}\n`);
    exitEndingWorkers(failed.length === 0 ? 0 : 1);
  }
}
