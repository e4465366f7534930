// The monitor over the fake libnvidia-ml (built from C, loaded through koffi).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HealthEvent } from '@svc/proto';
import { createLogger, ManualClock } from '@svc/shared';
import { createFakeNvmlFixture, FAKE_NVIDIA_SMI, openNvml, type FakeNvmlFixture, type Nvml } from 'node-nvml-bindings';
import { nvidiaSmiResetter } from '../health/gpu-reset.js';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GpuHealthFile } from '../health/health-file.js';
import { GpuMonitor } from './gpu-monitor.js';

const log = createLogger('silent', 'test');
let fixture: FakeNvmlFixture;
let nvml: Nvml;

beforeAll(async () => {
  fixture = await createFakeNvmlFixture({ gpus: [{ uuid: 'GPU-0', temperatureC: 40 }, { uuid: 'GPU-1', eccUncorrectedVolatile: 0 }] });
  nvml = openNvml({ libraryPath: fixture.libraryPath });
});
afterAll(async () => {
  await nvml.close();
  fixture.dispose();
});

function monitor(healthFile?: GpuHealthFile) {
  const events: HealthEvent[] = [];
  const m = new GpuMonitor({
    healthFile,
    // The fake nvidia-smi reads FAKE_NVML_STATE, which the fixture set in this process's environment.
    resetGpu: nvidiaSmiResetter(FAKE_NVIDIA_SMI),
    nvml,
    clock: new ManualClock(),
    log,
    policy: { ignoredXids: new Set([13]), maxTemperatureC: 90, temperatureHysteresisC: 5 },
    onHealthEvent: (e) => events.push(e),
  });
  return { m, events };
}

describe('GpuMonitor', () => {
  it('resets a GPU with nvidia-smi, clears its sticky XID and answers with its health read again', async () => {
    const { m, events } = monitor();
    m.sample();
    const watch = new AbortController();
    const watching = m.watch(watch.signal);
    fixture.state.injectXid(0, 95);
    await waitFor(() => events.some((e) => e.xid === 95));
    watch.abort();
    await watching;
    expect(events.at(-1)).toMatchObject({ kind: 'XID', healthy: false, recommended_action: 'RESET_GPU' });

    const outcome = await m.resetGpu('GPU-0');
    expect(outcome).toMatchObject({ ok: true, healthy: true, healthReason: '' });
    expect(outcome.output).toMatch(/was successfully reset/);
    expect(readFileSync(`${fixture.state.path}.resets`, 'utf8')).toBe('GPU-0\n');
    expect(events.at(-1)).toMatchObject({ gpu_uuid: 'GPU-0', kind: 'RECOVERED', healthy: true, message: 'GPU reset (nvidia-smi --gpu-reset)' });

    // A reset that leaves the GPU hot is no success; a GPU the tool refuses stays as it was.
    fixture.state.updateGpu(0, { temperatureC: 95 });
    expect(await m.resetGpu('GPU-0')).toMatchObject({ ok: false, errorCode: 'still_unhealthy', healthy: false });
    fixture.state.updateGpu(0, { temperatureC: 40 });
    m.sample();
    writeFileSync(`${fixture.state.path}.reset-fail`, 'GPU-1\n');
    expect(await m.resetGpu('GPU-1')).toMatchObject({ ok: false, errorCode: 'reset_failed' });
    expect(await m.resetGpu('GPU-9')).toMatchObject({ ok: false, errorCode: 'not_found' });
  });

  it('marks a hot GPU unhealthy on the sample and healthy once cooled', () => {
    const { m, events } = monitor();
    expect(m.sample().gpus.map((g) => g.healthy)).toEqual([true, true]);
    fixture.state.updateGpu(0, { temperatureC: 93 });
    const hot = m.sample();
    expect(hot.gpus[0]).toMatchObject({ healthy: false, health_reason: 'too hot (93 °C)', temperature_c: 93 });
    expect(events).toMatchObject([{ gpu_uuid: 'GPU-0', kind: 'THERMAL', healthy: false }]);
    fixture.state.updateGpu(0, { temperatureC: 80 });
    expect(m.sample().gpus[0]!.healthy).toBe(true);
    expect(events.at(-1)).toMatchObject({ gpu_uuid: 'GPU-0', kind: 'RECOVERED', healthy: true });
  });

  it('flags new uncorrectable ECC errors and recovers when a reset zeroes the counters', () => {
    fixture.state.updateGpu(1, { eccUncorrectedVolatile: 0 });
    const { m, events } = monitor();
    m.sample();
    fixture.state.updateGpu(1, { eccUncorrectedVolatile: 2 });
    expect(m.sample().gpus[1]).toMatchObject({ healthy: false, health_reason: '2 new uncorrectable ECC errors', ecc_uncorrected: 2 });
    fixture.state.updateGpu(1, { eccUncorrectedVolatile: 0 });
    expect(m.sample().gpus[1]!.healthy).toBe(true);
    expect(events.map((e) => e.kind)).toEqual(['ECC_UNCORRECTABLE', 'RECOVERED']);
  });

  it('reports a GPU it cannot read as unhealthy, and treats its return as a reset', async () => {
    const { m, events } = monitor();
    m.sample();
    const watch = new AbortController();
    const watching = m.watch(watch.signal);
    fixture.state.injectXid(1, 79);
    await waitFor(() => events.length > 0);
    expect(events[0]).toMatchObject({ gpu_uuid: 'GPU-1', kind: 'XID', xid: 79 });
    watch.abort();
    await watching;

    fixture.state.updateGpu(1, { errors: { uuid: 15 } }); // GPU is lost
    const lost = m.sample();
    expect(lost.gpus[1]).toMatchObject({ uuid: 'GPU-1', healthy: false });
    expect(lost.gpus[1]!.health_reason).toMatch(/^unreadable: /);
    fixture.state.updateGpu(1, { errors: {} });
    expect(m.sample().gpus[1]!.healthy).toBe(true);
    expect(events.at(-1)).toMatchObject({ gpu_uuid: 'GPU-1', kind: 'RECOVERED', message: 'GPU readable again after a reset' });
  });

  it('keeps a sticky verdict across an agent restart until the GPU is reset', () => {
    fixture.state.updateGpu(1, { eccUncorrectedVolatile: 0 });
    const file = new GpuHealthFile(mkdtempSync(join(tmpdir(), 'gpu-health-')));
    const before = monitor(file);
    before.m.sample();
    fixture.state.updateGpu(1, { eccUncorrectedVolatile: 4 });
    before.m.sample();
    expect(JSON.parse(readFileSync(file.path, 'utf8'))).toEqual({ 'GPU-1': { ecc: '4 new uncorrectable ECC errors' } });

    const after = monitor(file); // the restarted agent
    expect(after.m.sample().gpus[1]).toMatchObject({ healthy: false, health_reason: '4 new uncorrectable ECC errors' });
    expect(after.m.resetHealth('GPU-1')).toBe(true);
    expect(after.events).toMatchObject([{ gpu_uuid: 'GPU-1', kind: 'RECOVERED' }]);
    expect(JSON.parse(readFileSync(file.path, 'utf8'))).toEqual({});
    fixture.state.updateGpu(1, { eccUncorrectedVolatile: 0 });
  });

  it('refuses a corrupt health file with what to do', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpu-health-'));
    const file = new GpuHealthFile(dir);
    file.save({});
    writeFileSync(file.path, '{oops');
    expect(() => monitor(file)).toThrow(/gpu-health\.json is not valid .*remove it to start with every GPU healthy/);
  });

  it('resets one GPU or all on an operator command, and says when the GPU is unknown', () => {
    const { m } = monitor();
    m.sample();
    expect(m.resetHealth('GPU-1')).toBe(true);
    expect(m.resetHealth('')).toBe(true);
    expect(m.resetHealth('GPU-nope')).toBe(false);
  });
});

// Generous: the XID watch polls the (fake) driver from a worker, which a loaded host delays.
async function waitFor(predicate: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
