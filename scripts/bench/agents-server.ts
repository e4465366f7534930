// Bench helper for "agent gateway scale": a control plane's agent gateway (gRPC, the
// real registry and SQLite store, default report interval) in its own process, with
// BENCH_AGENTS_MAX node identities enrolled up front through the enrollment service.
// Prints {port, identities} when ready; exits when stdin closes (see child.ts).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROTOCOL_VERSION } from '@svc/proto';
import { AgentGateway } from '../../control-plane/src/agents/gateway.js';
import { buildServices } from '../../control-plane/src/app.js';
import { defaultControlPlaneConfig } from '../../control-plane/src/config.js';
import { openSqliteStore } from '../../control-plane/src/store/sqlite/sqlite-store.js';

export interface AgentsServerInfo {
  port: number;
  /** JSON file: [{ nodeId, secret }] */
  identities: string;
  reportIntervalMs: number;
}

const max = Number(process.env.BENCH_AGENTS_MAX ?? 10_000);
const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-agents-'));
const config = defaultControlPlaneConfig({ dataDir, grpcPort: 0, logLevel: 'silent' });
const store = openSqliteStore(dataDir);
const services = buildServices({ config, store });

const identities: Array<{ nodeId: string; secret: string }> = [];
for (let i = 0; i < max; i++) {
  const token = await services.enrollment.createToken({ pool: 'na' });
  const { node, secret } = await services.enrollment.enroll({ token: token.value, hostname: `sim-${i}`, pool: 'na', protocolVersion: PROTOCOL_VERSION });
  identities.push({ nodeId: node.id, secret });
}
const identitiesFile = join(dataDir, 'identities.json');
writeFileSync(identitiesFile, JSON.stringify(identities));

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const gateway = new AgentGateway({ config, store: store.nodes, enrollment: services.enrollment, log: silent });
const port = await gateway.listen();
const info: AgentsServerInfo = { port, identities: identitiesFile, reportIntervalMs: config.reportIntervalMs };
process.stdout.write(`${JSON.stringify(info)}\n`);

process.stdin.resume();
process.stdin.on('end', () => {
  gateway
    .close()
    .then(() => store.close())
    .finally(() => {
      rmSync(dataDir, { recursive: true, force: true });
      process.exit(0);
    });
});
