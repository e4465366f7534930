// The agent over TLS and mutual TLS against the fake control plane, with a throwaway CA.
import { readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, systemClock } from '@svc/shared';
import { startAgent, type RunningAgent } from '../agent.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { protocolOnlyAgentEnv } from '../testing/agent-env.js';
import { FakeControlPlane } from '../testing/fake-control-plane.js';
import { makeTestCertificates, type TestCertificates } from '../testing/test-certificates.js';

const log = createLogger('silent', 'tls-test');
const running: RunningAgent[] = [];
const planes: FakeControlPlane[] = [];
let certs: TestCertificates;

beforeAll(() => {
  certs = makeTestCertificates();
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
  await Promise.all(planes.splice(0).map((p) => p.stop()));
});

async function plane(mutual: boolean): Promise<FakeControlPlane> {
  const p = await new FakeControlPlane({
    tls: { cert: readFileSync(certs.serverCert), key: readFileSync(certs.serverKey), clientCa: mutual ? readFileSync(certs.ca) : undefined },
  }).start();
  planes.push(p);
  return p;
}

async function agent(cp: FakeControlPlane, env: Record<string, string>): Promise<void> {
  const config = loadAgentConfig(protocolOnlyAgentEnv({ SVC_CONTROL_PLANE: `localhost:${cp.port}`, ...env }));
  running.push(await startAgent(config, { log, clock: systemClock }));
}

const quietFor = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('TLS to the control plane', () => {
  it('connects when the CA verifies the server', async () => {
    const cp = await plane(false);
    await agent(cp, { SVC_AGENT_TLS_CA: certs.ca });
    await cp.waitFor(() => cp.sessions.length === 1, 5_000, 'a TLS session');
  });

  it('does not connect when the CA does not verify the server', async () => {
    const cp = await plane(false);
    await agent(cp, { SVC_AGENT_TLS_CA: certs.otherCa });
    await quietFor(1_000);
    expect(cp.enrollments).toEqual([]);
  });

  it('mutual TLS: connects with a client certificate, not without', async () => {
    const cp = await plane(true);
    await agent(cp, { SVC_AGENT_TLS_CA: certs.ca });
    await quietFor(1_000);
    expect(cp.enrollments).toEqual([]);
    await agent(cp, { SVC_AGENT_TLS_CA: certs.ca, SVC_AGENT_TLS_CERT: certs.clientCert, SVC_AGENT_TLS_KEY: certs.clientKey });
    await cp.waitFor(() => cp.sessions.length === 1, 5_000, 'a mutual-TLS session');
  });
});
