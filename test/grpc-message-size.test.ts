// The agent's gRPC stream is bounded both ways: the control plane refuses a message over
// SVC_GRPC_MAX_MESSAGE_BYTES from an agent (a hostile or broken node cannot make it buffer
// an unbounded one), and the agent neither sends nor accepts one over its own
// SVC_AGENT_GRPC_MAX_MESSAGE_BYTES. Real control plane, real gRPC over loopback.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { AgentGatewayClient } from '@svc/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultControlPlaneConfig } from '../control-plane/src/config.js';
import { startControlPlane } from '../control-plane/src/server.js';
import { createGatewayClient } from '../node-agent/src/transport/channel.js';
import { freePort } from './support/node-agent-process.js';

const LIMIT = 64 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'grpc-size-'));
let cp: Awaited<ReturnType<typeof startControlPlane>>;
let port: number;

function enroll(client: AgentGatewayClient, hostname: string): Promise<{ code: number; details: string }> {
  return new Promise((resolve) => {
    client.Enroll(
      { token: 'svc_nt_not-a-token', hostname, pool: 'na', protocol_version: 2 },
      (err) => resolve({ code: err?.code ?? grpc.status.OK, details: err?.details ?? '' }),
    );
  });
}

const agentClient = (maxBytes: number): AgentGatewayClient =>
  createGatewayClient({ controlPlane: `127.0.0.1:${port}`, useTls: false, tlsCa: '', tlsCert: '', tlsKey: '', tlsServerName: '', grpcMaxMessageBytes: maxBytes });

beforeAll(async () => {
  port = await freePort();
  cp = await startControlPlane(defaultControlPlaneConfig({ dataDir: join(dir, 'cp'), httpPort: 0, grpcPort: port, grpcMaxMessageBytes: LIMIT, logLevel: 'silent' }));
}, 60_000);

afterAll(async () => {
  await cp?.app.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('gRPC message sizes between agent and control plane', () => {
  it('the control plane refuses an agent message over its limit, and still answers a normal one', async () => {
    const generous = agentClient(16 * 1024 * 1024);
    try {
      const big = await enroll(generous, 'h'.repeat(LIMIT * 2));
      expect(big).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED, details: expect.stringMatching(/Received message larger than max/) });
      // A small request reaches the handler (which refuses the made-up token).
      const small = await enroll(generous, 'gpu-host-1');
      expect(small.code).not.toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(small.code).not.toBe(grpc.status.OK);
    } finally {
      generous.close();
    }
  });

  it('the agent does not send a message over its own limit', async () => {
    const strict = agentClient(LIMIT);
    try {
      const big = await enroll(strict, 'h'.repeat(LIMIT * 2));
      // Refused by the agent's own channel before sending (the control plane would say "Received").
      expect(big).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED, details: expect.stringMatching(/send message with a size larger than 65536/) });
    } finally {
      strict.close();
    }
  });
});
