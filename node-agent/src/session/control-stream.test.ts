import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import type { AgentMessage } from '@svc/proto';
import { ControlStream, type ControlCall } from './control-stream.js';
import { SessionEndedError } from './session-errors.js';

/** A stand-in for the gRPC call: records writes, answers write() with what the test says. */
class FakeCall extends EventEmitter {
  written: AgentMessage[] = [];
  accept = true;
  endCalls = 0;
  cancelled = false;
  write(message: AgentMessage): boolean {
    this.written.push(message);
    return this.accept;
  }
  end(): void {
    this.endCalls++;
  }
  cancel(): void {
    this.cancelled = true;
  }
}

const heartbeat = (seq: number): AgentMessage => ({ body: 'heartbeat', heartbeat: { seq } });

function setup() {
  const call = new FakeCall();
  const stream = new ControlStream(call as unknown as ControlCall, () => undefined);
  return { call, stream };
}

describe('ControlStream', () => {
  it('waits for drain when write() says the buffer is full, and keeps order', async () => {
    const { call, stream } = setup();
    call.accept = false;
    let firstDone = false;
    const first = stream.send(heartbeat(1)).then(() => (firstDone = true));
    const second = stream.send(heartbeat(2));
    await new Promise((r) => setImmediate(r));
    expect(firstDone).toBe(false);
    expect(call.written.map((m) => m.heartbeat?.seq)).toEqual([1]); // 2 waits behind 1
    call.accept = true;
    call.emit('drain');
    await Promise.all([first, second]);
    expect(call.written.map((m) => m.heartbeat?.seq)).toEqual([1, 2]);
  });

  it('never writes after the stream ended, and says why', async () => {
    const { call, stream } = setup();
    call.emit('error', Object.assign(new Error('14 UNAVAILABLE: gone'), { code: grpc.status.UNAVAILABLE, details: 'gone' }));
    const reason = await stream.ended;
    expect(reason).toBeInstanceOf(SessionEndedError);
    expect(reason.message).toBe('gone (UNAVAILABLE)');
    expect(reason.code).toBe(grpc.status.UNAVAILABLE);
    await expect(stream.send(heartbeat(1))).rejects.toBe(reason);
    expect(call.written).toEqual([]);
  });

  it('fails a write waiting for drain when the stream ends', async () => {
    const { call, stream } = setup();
    call.accept = false;
    const pending = stream.send(heartbeat(1));
    call.emit('end');
    await expect(pending).rejects.toThrow('the control plane ended the stream');
  });

  it('refuses writes after close() and ends the call once', async () => {
    const { call, stream } = setup();
    stream.close();
    stream.close();
    expect(call.endCalls).toBe(1);
    await expect(stream.send(heartbeat(1))).rejects.toThrow('closed for writing');
  });

  it('cancel() tears the call down and settles ended', async () => {
    const { call, stream } = setup();
    stream.cancel('shutting down');
    expect(call.cancelled).toBe(true);
    expect((await stream.ended).message).toBe('shutting down');
  });
});
