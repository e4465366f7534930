// applyKernelSettings on files standing in for /proc/sys (to see each case without lowering
// this host's tables under the suites running beside it), then on the real tables: the
// tests run as root, as the agent does. What a crash in a container costs the host with
// each core pattern is in core-dumps.test.ts.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { applyKernelSettings, CORE_PATTERN, kernelSettingsFor, OOM_REPORTS, SHARED_TABLES, type KernelSetting } from './kernel-settings.js';

const dir = mkdtempSync(join(tmpdir(), 'kernel-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `setting`, reading and writing a file of ours that holds `value` instead of its /proc/sys file. */
const standIn = (setting: KernelSetting, file: string, value: string): KernelSetting => {
  const path = join(dir, file);
  writeFileSync(path, `${value}\n`);
  return { ...setting, path };
};

const [fileMax, pidMax, ptyMax, epollWatches, inotifyInstances, inotifyWatches, pipePagesSoft, pipePagesHard] = SHARED_TABLES as KernelSetting[] as [KernelSetting, KernelSetting, KernelSetting, KernelSetting, KernelSetting, KernelSetting, KernelSetting, KernelSetting];
const SHARED_NAMES = ['fs.file-max', 'kernel.pid_max', 'kernel.pty.max', 'fs.epoll.max_user_watches', 'fs.inotify.max_user_instances', 'fs.inotify.max_user_watches', 'fs.pipe-user-pages-soft', 'fs.pipe-user-pages-hard'];

describe('applyKernelSettings', () => {
  it('raises a shared table below its target, leaves one at or above it alone, and says why when one cannot be read', async () => {
    const low = standIn(pidMax, 'low', '32768');
    const high = standIn(fileMax, 'high', '9223372036854775807');
    const garbled = standIn(pidMax, 'garbled', 'many');
    const outcomes = await applyKernelSettings([low, high, garbled, { ...fileMax, path: join(dir, 'missing') }]);
    expect(outcomes.map(({ setting, ...rest }) => ({ name: setting.name, ...rest }))).toEqual([
      { name: 'kernel.pid_max', changed: true, from: '32768', to: '4194304' },
      { name: 'fs.file-max', changed: false, value: '9223372036854775807' },
      { name: 'kernel.pid_max', changed: false, error: expect.stringContaining('many') },
      { name: 'fs.file-max', changed: false, error: expect.stringContaining('ENOENT') },
    ]);
    expect(readFileSync(low.path, 'utf8')).toBe('4194304');
    expect(readFileSync(high.path, 'utf8')).toBe('9223372036854775807\n');
  });

  it('turns off the per-user pipe budgets, and leaves them alone when off', async () => {
    const soft = standIn(pipePagesSoft, 'pipe-soft', '16384');
    const hard = standIn(pipePagesHard, 'pipe-hard', '0');
    const outcomes = await applyKernelSettings([soft, hard]);
    expect(outcomes.map(({ setting, ...rest }) => ({ name: setting.name, ...rest }))).toEqual([
      { name: 'fs.pipe-user-pages-soft', changed: true, from: '16384', to: '0' },
      { name: 'fs.pipe-user-pages-hard', changed: false, value: '0' },
    ]);
    expect(readFileSync(soft.path, 'utf8')).toBe('0');
  });

  it.each([
    ['systemd-coredump', '|/usr/lib/systemd/systemd-coredump %P %u %g %s %t 9223372036854775808 %h', 'core'],
    ['apport', '|/usr/share/apport/apport -p%p -s%s -c%c -d%d -P%P -u%u -g%g -- %E', 'core'],
    ["systemd 258's socket (Linux 6.16)", '@@/run/systemd/coredump.socket', 'core'],
    ["the kernel's default", 'core', null],
    ['a file per process', '/var/crash/core.%e.%p', null],
  ])('core dumps handed to %s: %s', async (_, pattern, after) => {
    const setting = standIn(CORE_PATTERN, `pattern-${pattern.length}`, pattern);
    const [outcome] = await applyKernelSettings([setting]);
    if (after === null) {
      expect(outcome).toMatchObject({ changed: false, value: pattern });
      expect(readFileSync(setting.path, 'utf8')).toBe(`${pattern}\n`);
    } else {
      expect(outcome).toMatchObject({ changed: true, from: pattern, to: after });
      expect(readFileSync(setting.path, 'utf8')).toBe(after);
    }
  });

  it('leaves the core pattern to the host when SVC_CONTAINER_CORE_DUMPS=false', () => {
    expect(kernelSettingsFor({ containerCoreDumps: true }).map((s) => s.name)).toEqual([...SHARED_NAMES, 'kernel.io_uring_disabled', 'vm.oom_dump_tasks', 'kernel.core_pattern']);
    expect(kernelSettingsFor({ containerCoreDumps: false }).map((s) => s.name)).toEqual([...SHARED_NAMES, 'kernel.io_uring_disabled', 'vm.oom_dump_tasks']);
  });

  it("turns off the out-of-memory report's list of every process, on this host too", async () => {
    const [outcome] = await applyKernelSettings([OOM_REPORTS]);
    expect(outcome).not.toHaveProperty('error');
    expect(readFileSync(OOM_REPORTS.path, 'utf8').trim()).toBe('0');
    expect(OOM_REPORTS.wanted('1')).toBe('0');
    expect(OOM_REPORTS.wanted('0')).toBeNull();
  });

  it("leaves this host's shared tables and per-user counts at least at their targets", async () => {
    for (const outcome of await applyKernelSettings(SHARED_TABLES)) expect(outcome).not.toHaveProperty('error');
    const value = (path: string) => BigInt(readFileSync(path, 'utf8').trim());
    expect(value(fileMax.path)).toBe(9223372036854775807n);
    expect(value(pidMax.path)).toBeGreaterThanOrEqual(4194304n);
    expect(value(ptyMax.path)).toBe(1048576n);
    expect(value(epollWatches.path)).toBe(9223372036854775807n);
    expect([value(inotifyInstances.path), value(inotifyWatches.path)]).toEqual([2147483647n, 2147483647n]);
    expect([value(pipePagesSoft.path), value(pipePagesHard.path)]).toEqual([0n, 0n]);
  });
});
