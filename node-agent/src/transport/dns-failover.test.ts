// A control plane behind one DNS name with several A records: SVC_CONTROL_PLANE names it
// once, and the agent reaches whichever of its addresses is up, moving between them as
// replicas come and go. The name is real resolution, not a stub: scripts/setup-host.sh
// gives cp-replicas.svc.test two loopback addresses in /etc/hosts, which getaddrinfo
// (the TCP check's and gRPC's resolver both use it) returns together. Two fake control
// planes (real gRPC servers, over TLS as any name off the loopback list requires) listen
// on the same port, one on each address.
import { lookup } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, systemClock } from '@svc/shared';
import { startAgent, type RunningAgent } from '../agent.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { protocolOnlyAgentEnv } from '../testing/agent-env.js';
import { FakeControlPlane } from '../testing/fake-control-plane.js';
import { makeTestCertificates, type TestCertificates } from '../testing/test-certificates.js';

const NAME = 'cp-replicas.svc.test';
const ADDRESSES = ['127.0.0.1', '127.0.0.3'];

const log = createLogger('silent', 'dns-failover-test');
const running: RunningAgent[] = [];
const planes: FakeControlPlane[] = [];
let certs: TestCertificates;

beforeAll(async () => {
  const found = (await lookup(NAME, { all: true }).catch(() => [])).map((a) => a.address).sort();
  if (found.join() !== ADDRESSES.join()) {
    throw new Error(`${NAME} resolves to [${found.join(', ')}], not [${ADDRESSES.join(', ')}]: run 'bash scripts/setup-host.sh' (as root) to add it to /etc/hosts`);
  }
  certs = makeTestCertificates();
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
  await Promise.all(planes.splice(0).map((p) => p.stop()));
});

describe('a control plane behind a name with several A records', () => {
  it('the agent dials the name, reaches the address that is up, and moves to the other when its replica dies, as the same node', async () => {
    const tls = { cert: readFileSync(certs.serverCert), key: readFileSync(certs.serverKey) };
    const first = await new FakeControlPlane({ tls, host: ADDRESSES[0] }).start();
    planes.push(first);
    // The same port on the second address: the name stands for both.
    const second = new FakeControlPlane({ tls, host: ADDRESSES[1] });
    second.port = first.port;
    planes.push(second);

    const config = loadAgentConfig(
      protocolOnlyAgentEnv({
        SVC_CONTROL_PLANE: `${NAME}:${first.port}`,
        SVC_AGENT_TLS_CA: certs.ca,
        // The test certificate names localhost; the name under test is what is dialed.
        SVC_AGENT_TLS_SERVER_NAME: 'localhost',
      }),
    );
    expect(config.controlPlanes).toEqual([`${NAME}:${first.port}`]);
    running.push(await startAgent(config, { log, clock: systemClock }));
    const session = await first.waitFor(() => first.current, 10_000, `a session through ${NAME} with the replica on ${ADDRESSES[0]}`);
    const [nodeId, secret] = [...first.nodes.entries()][0]!;

    // The replica on the first address dies; the one on the second shares the store (the node's identity).
    await first.stop();
    second.nodes.set(nodeId, secret);
    await second.start();
    const moved = await second.waitFor(() => second.current, 10_000, `a session through ${NAME} with the replica on ${ADDRESSES[1]}`);
    expect(moved.hello.node_id).toBe(session.hello.node_id);
    expect(moved.hello.node_secret).toBe(secret);
    expect(second.enrollments).toEqual([]);

    // And back: the first address answers again, the second goes.
    first.nodes.set(nodeId, secret);
    await first.start();
    await second.stop();
    const back = await first.waitFor(() => first.sessions.length > 1 && first.current, 10_000, `a session through ${NAME} with the replica on ${ADDRESSES[0]} again`);
    expect(back.hello.node_id).toBe(nodeId);
    expect(first.enrollments).toHaveLength(1);
  });
});
