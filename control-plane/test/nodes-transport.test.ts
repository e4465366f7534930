// The agent gateway's transport: TLS and mutual TLS with throwaway openssl certificates,
// and the refusal to serve plaintext anywhere but loopback.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '@svc/shared';
import { AgentGateway } from '../src/agents/gateway.js';
import { buildServices } from '../src/app.js';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../src/config.js';
import { startControlPlane } from '../src/server.js';
import { openSqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { enroll, gatewayClient } from './fake-agent.js';
import { tempDataDir } from './harness.js';

const silent = { debug() {}, info() {}, warn() {}, error() {} };
let certs: string;
const pem = (name: string) => join(certs, name);

/** A CA, a server certificate for localhost/127.0.0.1 and a client certificate, all signed by the CA. */
beforeAll(() => {
  certs = mkdtempSync(join(tmpdir(), 'svc-certs-'));
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: certs, stdio: 'pipe', timeout: 60_000 });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=svc test CA', '-keyout', 'ca.key', '-out', 'ca.pem');
  for (const [name, cn, ext] of [
    ['server', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
    ['client', 'node-agent', 'extendedKeyUsage=clientAuth'],
  ] as const) {
    writeFileSync(join(certs, `${name}.ext`), `${ext}\n`);
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
  }
}, 30_000);

afterAll(() => rmSync(certs, { recursive: true, force: true }));

async function tlsGateway(overrides: Partial<ControlPlaneConfig>) {
  const dataDir = tempDataDir();
  const config = defaultControlPlaneConfig({ dataDir, grpcPort: 0, grpcTlsCert: pem('server.pem'), grpcTlsKey: pem('server.key'), ...overrides });
  const store = openSqliteStore(dataDir);
  const services = buildServices({ config, store });
  const gateway = new AgentGateway({ config, store: store.nodes, enrollment: services.enrollment, log: silent });
  const port = await gateway.listen();
  return {
    address: `localhost:${port}`,
    token: async () => (await services.enrollment.createToken()).value,
    async close() {
      await gateway.close();
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

describe('gateway transport', () => {
  it('serves TLS, and with mutual TLS admits only agents with a certificate from the CA', async () => {
    const plane = await tlsGateway({ grpcTlsCa: pem('ca.pem'), grpcMutualTls: true });
    try {
      const ca = readFileSync(pem('ca.pem'));
      const withCert = gatewayClient(plane.address, grpc.credentials.createSsl(ca, readFileSync(pem('client.key')), readFileSync(pem('client.pem'))));
      const identity = await enroll(withCert, await plane.token());
      expect(identity.node_id).toMatch(/^node_/);

      const withoutCert = gatewayClient(plane.address, grpc.credentials.createSsl(ca));
      const refused = await enroll(withoutCert, await plane.token()).catch((err: grpc.ServiceError) => err);
      expect(refused).toMatchObject({ code: grpc.status.UNAVAILABLE });

      const plaintext = gatewayClient(plane.address);
      const refusedPlain = await enroll(plaintext, await plane.token()).catch((err: grpc.ServiceError) => err);
      expect(refusedPlain).toMatchObject({ code: grpc.status.UNAVAILABLE });
      for (const c of [withCert, withoutCert, plaintext]) c.close();
    } finally {
      await plane.close();
    }
  });

  it('serves TLS without client certificates when mutual TLS is off', async () => {
    const plane = await tlsGateway({ grpcHost: '127.0.0.1' });
    try {
      const client = gatewayClient(plane.address, grpc.credentials.createSsl(readFileSync(pem('ca.pem'))));
      expect((await enroll(client, await plane.token())).node_id).toMatch(/^node_/);
      client.close();
    } finally {
      await plane.close();
    }
  });

  it('refuses to start with plaintext on a non-loopback address, naming the fix', async () => {
    const dataDir = tempDataDir();
    try {
      const config = defaultControlPlaneConfig({ dataDir, httpPort: 0, grpcPort: 0, grpcHost: '0.0.0.0', logLevel: 'silent' });
      const started = startControlPlane(config);
      await expect(started).rejects.toBeInstanceOf(ConfigError);
      await expect(started).rejects.toThrow(/SVC_GRPC_HOST=0.0.0.0 is not a loopback address.*SVC_GRPC_TLS_CERT/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('starts the gateway with the control plane and exposes the bound port', async () => {
    const dataDir = tempDataDir();
    const config = defaultControlPlaneConfig({ dataDir, httpPort: 0, grpcPort: 0, logLevel: 'silent' });
    const { app, grpcPort } = await startControlPlane(config);
    try {
      expect(grpcPort).toBeGreaterThan(0);
      const token = await app.services.enrollment.createToken();
      const client = gatewayClient(`127.0.0.1:${grpcPort}`);
      expect((await enroll(client, token.value)).node_id).toMatch(/^node_/);
      client.close();
    } finally {
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
