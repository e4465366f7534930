// End to end over mutual TLS: the real control plane's gRPC gateway with a server
// certificate and required client certificates, and real agent processes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultControlPlaneConfig } from '../control-plane/src/config.js';
import { startControlPlane } from '../control-plane/src/server.js';
import { makeTestCertificates, type TestCertificates } from '../node-agent/src/testing/test-certificates.js';
import { eventually, freePort, spawnAgent, type AgentProcess } from './support/node-agent-process.js';

type ControlPlane = Awaited<ReturnType<typeof startControlPlane>>;

const dir = mkdtempSync(join(tmpdir(), 'node-agent-tls-e2e-'));
let cp: ControlPlane;
let certs: TestCertificates;
let grpcPort: number;
const agents: AgentProcess[] = [];

beforeAll(async () => {
  certs = makeTestCertificates();
  grpcPort = await freePort();
  cp = await startControlPlane(
    defaultControlPlaneConfig({
      dataDir: join(dir, 'control-plane'),
      httpPort: 0,
      grpcPort,
      grpcTlsCert: certs.serverCert,
      grpcTlsKey: certs.serverKey,
      grpcTlsCa: certs.ca,
      grpcMutualTls: true,
      reportIntervalMs: 500,
      logLevel: 'warn',
    }),
  );
});

afterAll(async () => {
  for (const a of agents) if (a.child.exitCode === null) a.child.kill('SIGKILL');
  await cp?.app.close();
  rmSync(dir, { recursive: true, force: true });
  rmSync(certs.dir, { recursive: true, force: true });
});

async function agent(name: string, env: Record<string, string>): Promise<AgentProcess> {
  const a = spawnAgent({
    SVC_CONTROL_PLANE: `localhost:${grpcPort}`,
    SVC_AGENT_DATA_DIR: join(dir, name),
    SVC_AGENT_HOSTNAME: name,
    SVC_NODE_TOKEN: (await cp.app.services.enrollment.createToken()).value,
    SVC_SIMULATE_GPUS: '2',
    SVC_AGENT_TLS_CA: certs.ca,
    ...env,
  });
  agents.push(a);
  return a;
}

describe('node agent over mutual TLS', () => {
  it('enrolls and reports with a client certificate', async () => {
    await agent('tls-node', { SVC_AGENT_TLS_CERT: certs.clientCert, SVC_AGENT_TLS_KEY: certs.clientKey });
    const detail = await eventually(async () => {
      const d = await cp.app.services.nodes.show('tls-node');
      return d.node.status === 'ready' && d.gpus.length === 2 ? d : undefined;
    }, 15_000, 'tls-node ready with 2 GPUs');
    expect(detail.gpus.every((g) => g.healthy)).toBe(true);
  });

  it('gets nowhere without a client certificate', async () => {
    const a = await agent('no-client-cert', {});
    // The agent's own start-up (Node + tsx) comes first: seconds on a loaded host.
    await eventually(() => /reconnecting/.test(a.output()), 45_000, 'the agent retrying');
    expect((await cp.app.services.nodes.list()).map((n) => n.node.hostname)).not.toContain('no-client-cert');
  }, 60_000);

  it('refuses to dial plaintext to a control plane off loopback', async () => {
    const a = spawnAgent({ SVC_CONTROL_PLANE: 'cp.example.com:7070', SVC_AGENT_DATA_DIR: join(dir, 'plain') });
    agents.push(a);
    expect(await a.exited).toBe(2);
    expect(a.output()).toMatch(/refusing plaintext gRPC to cp\.example\.com:7070/);
  });
});
