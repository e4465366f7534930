// The XID / ECC event watch against the fake library: events injected through the
// state file arrive, each once; a quiet watch times out cleanly, keeps the event
// loop free and stops on abort or close().
import { afterEach, describe, expect, it } from 'vitest';
import { createFakeNvmlFixture, type FakeNvmlFixture } from './fake/fake-nvml-fixture.js';
import type { FakeNvmlState } from './fake/fake-state.js';
import { NvmlError } from './nvml-error.js';
import { openNvml } from './nvml.js';
import type { Nvml, NvmlEvent } from './types.js';

let fixture: FakeNvmlFixture | undefined;
let nvml: Nvml | undefined;
let stop: AbortController;

async function open(state: FakeNvmlState): Promise<{ nvml: Nvml; fixture: FakeNvmlFixture }> {
  fixture = await createFakeNvmlFixture(state);
  nvml = openNvml({ libraryPath: fixture.libraryPath });
  expect(nvml.unavailableReason).toBeUndefined();
  stop = new AbortController();
  return { nvml, fixture };
}

afterEach(async () => {
  stop?.abort();
  await nvml?.close();
  fixture?.dispose();
  nvml = undefined;
  fixture = undefined;
});

/** Collects events until `count` arrived or `ms` passed, then aborts the watch. */
async function collect(events: AsyncIterable<NvmlEvent>, count: number, ms: number): Promise<NvmlEvent[]> {
  const timer = setTimeout(() => stop.abort(), ms);
  const seen: NvmlEvent[] = [];
  try {
    for await (const event of events) {
      seen.push(event);
      if (seen.length >= count) break;
    }
  } finally {
    clearTimeout(timer);
  }
  return seen;
}

const uuidOf = (i: number) => `GPU-00000000-0000-4000-8000-00000000000${i}`;

describe('watchEvents', () => {
  it('delivers an XID injected while the watch is waiting', async () => {
    const { nvml, fixture } = await open({ gpus: [{}, {}] });
    const events = nvml.watchEvents({ timeoutMs: 100, signal: stop.signal });

    setTimeout(() => fixture.state.injectXid(1, 79), 150);
    const started = Date.now();
    const seen = await collect(events, 1, 3000);

    expect(seen).toEqual([{ type: 'xid', index: 1, uuid: uuidOf(1), xid: 79, data: 79 }]);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('delivers events queued before the watch, in order, each only once', async () => {
    const { nvml, fixture } = await open({ gpus: [{}, {}] });
    fixture.state.injectXid(0, 48);
    fixture.state.injectEvent({ gpu: 1, type: 'ecc_double' });
    fixture.state.injectXid(1, 13);

    const seen = await collect(nvml.watchEvents({ timeoutMs: 50, signal: stop.signal }), 3, 3000);
    expect(seen).toEqual([
      { type: 'xid', index: 0, uuid: uuidOf(0), xid: 48, data: 48 },
      { type: 'ecc_double', index: 1, uuid: uuidOf(1), data: 0 },
      { type: 'xid', index: 1, uuid: uuidOf(1), xid: 13, data: 13 },
    ]);

    // A second watch, even from a fresh session, does not see them again.
    await nvml.close();
    const again = openNvml({ libraryPath: fixture.libraryPath });
    try {
      stop = new AbortController();
      expect(await collect(again.watchEvents({ timeoutMs: 50, signal: stop.signal }), 1, 300)).toEqual([]);
    } finally {
      await again.close();
    }
  });

  it('gives every watch the event, so an abandoned watch still in its native wait takes it from no one', async () => {
    const { nvml, fixture } = await open({ gpus: [{}, {}] });
    // The first watch is abandoned while its 800 ms native wait still polls the driver.
    const first = new AbortController();
    const abandoned = nvml.watchEvents({ timeoutMs: 800, signal: first.signal })[Symbol.asyncIterator]();
    const ended = abandoned.next();
    await new Promise((resolve) => setTimeout(resolve, 50));
    first.abort();
    expect(await ended).toEqual({ done: true, value: undefined });

    const seen = collect(nvml.watchEvents({ timeoutMs: 50, signal: stop.signal }), 1, 3000);
    fixture.state.injectXid(1, 79);
    expect(await seen).toEqual([{ type: 'xid', index: 1, uuid: uuidOf(1), xid: 79, data: 79 }]);
  });

  it('times out cleanly, again and again, when nothing happens', async () => {
    const { nvml } = await open({ gpus: [{}] });
    // About eight 30 ms waits answer NVML_ERROR_TIMEOUT; none of them may surface.
    const seen = await collect(nvml.watchEvents({ timeoutMs: 30, signal: stop.signal }), 1, 250);
    expect(seen).toEqual([]);
  });

  it('waits off the event loop and stops on abort without waiting for the native call', async () => {
    const { nvml } = await open({ gpus: [{}] });
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 20);
    const started = Date.now();

    // One native wait of 600 ms: were it on the main thread, no timer could fire.
    const done = collect(nvml.watchEvents({ timeoutMs: 600, signal: stop.signal }), 1, 200);
    await expect(done).resolves.toEqual([]);
    const endedAfter = Date.now() - started;
    clearInterval(ticker);
    expect(ticks).toBeGreaterThanOrEqual(4);
    expect(endedAfter).toBeLessThan(450);

    // close() waits for that native wait to return before nvmlShutdown.
    await nvml.close();
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
  });

  it('ends at once when the signal is already aborted', async () => {
    const { nvml } = await open({ gpus: [{}] });
    stop.abort();
    const seen = [];
    for await (const event of nvml.watchEvents({ signal: stop.signal })) seen.push(event);
    expect(seen).toEqual([]);
  });

  it('ends a running watch on close()', async () => {
    const { nvml } = await open({ gpus: [{}] });
    const done = collect(nvml.watchEvents({ timeoutMs: 100 }), 1, 5000);
    await new Promise((resolve) => setTimeout(resolve, 150));
    await nvml.close();
    await expect(done).resolves.toEqual([]);
  });

  it('watches only the GPUs asked for and the event types asked for', async () => {
    const { nvml, fixture } = await open({ gpus: [{}, {}] });
    fixture.state.injectXid(1, 31);
    fixture.state.injectEvent({ gpu: 0, type: 'ecc_single' });
    fixture.state.injectXid(0, 43);

    const seen = await collect(nvml.watchEvents({ timeoutMs: 50, signal: stop.signal, devices: [0], types: ['xid'] }), 2, 500);
    expect(seen).toEqual([{ type: 'xid', index: 0, uuid: uuidOf(0), xid: 43, data: 43 }]);
  });

  it('skips a GPU that does not support events', async () => {
    const { nvml, fixture } = await open({ gpus: [{ unsupported: ['events'] }, {}] });
    fixture.state.injectXid(0, 79);
    fixture.state.injectXid(1, 94);

    const seen = await collect(nvml.watchEvents({ timeoutMs: 50, signal: stop.signal }), 2, 500);
    expect(seen).toEqual([{ type: 'xid', index: 1, uuid: uuidOf(1), xid: 94, data: 94 }]);
  });

  it('throws an NvmlError when a GPU cannot be registered', async () => {
    const { nvml } = await open({ gpus: [{}, { errors: { events: 15 } }] });
    const events = nvml.watchEvents({ timeoutMs: 50, signal: stop.signal });

    const failure = collect(events, 1, 1000);
    await expect(failure).rejects.toThrow(NvmlError);
    await expect(failure).rejects.toMatchObject({ code: 15, gpuIndex: 1, nvmlMessage: 'GPU is lost' });
  });
});
