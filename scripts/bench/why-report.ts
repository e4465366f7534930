// Section: `svcctl why` on a large fleet. Seeds a SQLite store with 1,000 simulated nodes
// of 8 GPUs (telemetry samples, a 40-row health timeline per node with XIDs and
// remediation steps, one instance per node and an open remediation on every tenth), then
// times the report for node, GPU and instance references: built in process, over the
// operator API (GET /ops/v1/why/{ref} with an operator key, as remote svcctl asks it),
// and as whole remote CLI processes (Node start-up and tsx included).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { buildWhyReport, renderWhyReport } from '../../control-plane/src/incidents/why-report.js';
import { openSqliteStore } from '../../control-plane/src/store/sqlite/sqlite-store.js';
import { buildApp } from '../../control-plane/src/app.js';
import { defaultControlPlaneConfig } from '../../control-plane/src/config.js';
import { OperatorKeyService } from '../../control-plane/src/operators/operator-key-service.js';
import { systemClock } from '@svc/shared';
import type { InstanceRecord } from '../../control-plane/src/instances/instance-record.js';
import { fmtMs, percentile, table } from './format.js';
import type { Section, SectionReport } from './section.js';

const NODES = 1000;
const GPUS = 8;
const EVENTS_PER_NODE = 40;
const RUNS = 300;
const CLI_RUNS = 3;
const TARGET_P99_MS = 1000;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const gpuUuid = (n: number, g: number) => `GPU-${n.toString(16).padStart(8, '0')}-0000-4000-8000-${g.toString(16).padStart(12, '0')}`;

async function seed(dataDir: string): Promise<{ nodeIds: string[]; instanceIds: string[] }> {
  const store = openSqliteStore(dataDir);
  const now = Date.now();
  const nodeIds: string[] = [];
  const instanceIds: string[] = [];
  const { org } = { org: { id: 'org_bench', name: 'bench' } };
  await store.orgs.create({ id: org.id, name: org.name, tier: 2, ipAllowlist: [], referrerAllowlist: [], allowedModels: null, createdAt: now });
  const db = store.db;
  const insertNode = db.prepare(
    `INSERT INTO nodes (id, secret_hash, hostname, pool, status, enrolled_at, connected_at, last_seen_at, agent_version, protocol_version)
     VALUES (?, x'00', ?, 'na', 'ready', ?, ?, ?, '0.1.0', 4)`,
  );
  const insertEvent = db.prepare(
    `INSERT INTO node_health_events (node_id, gpu_uuid, gpu_index, kind, xid, healthy, message, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const insertRemediation = db.prepare(
    `INSERT INTO gpu_remediations (id, node_id, gpu_uuid, gpu_index, xid, action, kind, stage, fault, detail, holders, trigger_seq, opened_at, updated_at)
     VALUES (?, ?, ?, 3, 48, 'RESET_GPU', 'reset_gpu', 'waiting_idle', 'XID 48: double-bit ECC error', 'waiting', '[]', 0, ?, ?)`,
  );
  db.transaction(() => {
    for (let n = 0; n < NODES; n++) {
      const id = `node_bench${n.toString().padStart(5, '0')}`;
      nodeIds.push(id);
      insertNode.run(id, `gpu-host-${n}`, now - 86_400_000, now - 3_600_000, now);
      for (let e = 0; e < EVENTS_PER_NODE; e++) {
        const g = e % GPUS;
        const xid = [13, 48, 31, 79, 95][e % 5]!;
        insertEvent.run(id, gpuUuid(n, g), g, e % 4 === 3 ? 'remediation' : 'xid', xid, e % 4 === 3 ? null : e % 2, `XID ${xid}: bench event ${e}`, now - (EVENTS_PER_NODE - e) * 60_000);
      }
      if (n % 10 === 0) insertRemediation.run(`rem_bench${n}`, id, gpuUuid(n, 3), now - 600_000, now - 60_000);
    }
  })();
  await store.nodes.flushTelemetry(
    nodeIds.map((id, n) => ({
      nodeId: id,
      lastSeenAt: now,
      gpus: Array.from({ length: GPUS }, (_, g) => ({
        uuid: gpuUuid(n, g),
        index: g,
        name: 'NVIDIA H100 80GB HBM3',
        memoryTotalBytes: 85_520_809_984,
        healthy: !(n % 10 === 0 && g === 3),
        healthReason: n % 10 === 0 && g === 3 ? 'critical XID 48' : '',
        sample: { temperature_c: 40 + g, ecc_uncorrected: 0, utilization_gpu_percent: 90, memory_used_bytes: 2 ** 34 },
        sampledAt: now,
      })),
    })),
  );
  for (let n = 0; n < NODES; n++) {
    const instance: InstanceRecord = {
      id: `inst_bench${n}`, orgId: org.id, keyId: null, status: 'ready', failureReason: null, sku: 'h100-80gb', gpus: 1, pool: 'na',
      mode: 'on_demand', durationHours: null, image: 'bench', sshKeys: [], labels: {}, nodeId: nodeIds[n]!, gpuUuids: [gpuUuid(n, 3)],
      rateMicros: 1, progress: null, createdAt: now, readyAt: now, expiresAt: null, terminatedAt: null, stop: null, access: null, updatedAt: now,
    };
    await store.instances.create(instance, { id: `evt_bench${n}`, type: 'instance.lifecycle', orgId: org.id, subject: instance.id, data: {}, createdAt: now }, null);
    instanceIds.push(instance.id);
  }
  await store.close();
  return { nodeIds, instanceIds };
}

export const whyReportSection: Section = {
  title: 'svcctl why on 1,000 nodes',
  async run(): Promise<SectionReport> {
    const dir = mkdtempSync(join(tmpdir(), 'bench-why-'));
    try {
      const { nodeIds, instanceIds } = await seed(dir);
      const store = openSqliteStore(dir);
      const kinds: Array<[string, (i: number) => string]> = [
        ['node id', (i) => nodeIds[(i * 37) % NODES]!],
        ['GPU UUID', (i) => gpuUuid((i * 53) % NODES, i % GPUS)],
        ['instance id', (i) => instanceIds[(i * 71) % NODES]!],
      ];
      const rows: string[][] = [];
      let worstP99 = 0;
      for (const [name, ref] of kinds) {
        const times: number[] = [];
        for (let i = 0; i < RUNS; i++) {
          const started = performance.now();
          renderWhyReport(await buildWhyReport(store, ref(i), Date.now()));
          times.push(performance.now() - started);
        }
        worstP99 = Math.max(worstP99, percentile(times, 99));
        rows.push([name, fmtMs(percentile(times, 50)), fmtMs(percentile(times, 99))]);
      }
      // The same references over the operator API, as remote svcctl asks them.
      const { value: operatorKey } = await new OperatorKeyService(store.operators, systemClock).create({ scopes: ['operator:read'], name: 'bench', createdBy: 'bench' });
      const app = await buildApp({ config: defaultControlPlaneConfig({ dataDir: dir, httpPort: 0, logLevel: 'silent' }), store, logger: false });
      await app.listen({ host: '127.0.0.1', port: 0 });
      // A control plane that starts on this fleet first works through the 40,000-row
      // timeline (the remediation loop); time the reports in the steady state after that,
      // and report how long it took.
      const settling = performance.now();
      const lastSeq = (store.db.prepare('SELECT MAX(seq) AS seq FROM node_health_events').get() as { seq: number }).seq;
      while ((await store.remediations.cursor()) < lastSeq) await new Promise((r) => setTimeout(r, 100));
      const settledMs = performance.now() - settling;
      const address = app.server.address();
      const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
      try {
        for (const [name, ref] of kinds) {
          const times: number[] = [];
          for (let i = 0; i < RUNS; i++) {
            const started = performance.now();
            const res = await fetch(`${url}/ops/v1/why/${encodeURIComponent(ref(i))}`, { headers: { authorization: `Bearer ${operatorKey}` } });
            if (res.status !== 200) throw new Error(`GET /ops/v1/why answered ${res.status}: ${await res.text()}`);
            renderWhyReport((await res.json()) as Awaited<ReturnType<typeof buildWhyReport>>);
            times.push(performance.now() - started);
          }
          worstP99 = Math.max(worstP99, percentile(times, 99));
          rows.push([`${name}, over the operator API`, fmtMs(percentile(times, 50)), fmtMs(percentile(times, 99))]);
        }
        const cli: number[] = [];
        for (let i = 0; i < CLI_RUNS; i++) {
          const started = performance.now();
          await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), '--url', url, 'why', gpuUuid(10 * i, 3)], {
            cwd: ROOT,
            env: { ...process.env, SVC_OPERATOR_KEY: operatorKey, HOME: dir },
          });
          cli.push(performance.now() - started);
        }
        rows.push(['whole remote CLI process (GPU UUID)', fmtMs(percentile(cli, 50)), fmtMs(Math.max(...cli))]);
        return {
          summary: `report p99 ${fmtMs(worstP99)} over ${NODES} nodes x ${GPUS} GPUs, in process and over the operator API (target < ${TARGET_P99_MS} ms); remote CLI process ${fmtMs(percentile(cli, 50))}`,
          verdict: worstP99 < TARGET_P99_MS ? 'PASS' : 'MISS',
          details: [
            `${NODES} nodes, ${NODES * GPUS} GPUs, ${NODES * EVENTS_PER_NODE} timeline rows, ${NODES} instances, ${NODES / 10} open remediations; ${RUNS} reports per reference kind and path.`,
            `The started control plane read the whole timeline into its remediation loop in ${fmtMs(settledMs)}; the API timings come after that.`,
            ...table(['reference', 'p50', 'p99 (CLI: max)'], rows),
          ],
        };
      } finally {
        await app.close();
        await store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
