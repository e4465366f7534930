// Section "agent gateway scale": N simulated node agents, each one real gRPC Connect
// stream sending a heartbeat and 8 GPUs of telemetry every default report interval, for
// N stepping up toward 10,000. The control plane's gateway (agents-server.ts) and the
// simulators (agents-sim.ts, several processes, many channels) run in separate
// processes; the table shows the gateway process's CPU (% of one core, from
// /proc/<pid>/stat deltas over a measuring window) and RSS at each N.
// Target: 10,000 agents within one core.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { startChild } from './child.js';
import { fmtInt, table } from './format.js';
import type { AgentsServerInfo } from './agents-server.js';
import type { SimStatus } from './agents-sim.js';
import type { Section, SectionReport } from './section.js';

const LEVELS = (process.env.BENCH_AGENT_LEVELS ?? '1000,2500,5000,10000').split(',').map(Number);
const SIM_PROCESSES = 2;
const TARGET_AGENTS = 10_000;
const TARGET_CORES = 1;
const CONNECT_TIMEOUT_MS = 60_000;

export const agentsScaleSection: Section = {
  title: 'Agent gateway scale (gRPC sessions, 8 GPUs each)',
  run,
};

interface Sim {
  process: ChildProcess;
  status: SimStatus;
  stop(): void;
}

function startSim(script: string, port: number, identities: string, from: number, to: number): Sim {
  const child = spawn(process.execPath, ['--import', 'tsx', script, String(port), identities, String(from), String(to)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const kill = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', kill);
  const sim: Sim = {
    process: child,
    status: { welcomed: 0, acks: 0, ended: 0, lastError: null },
    stop() {
      process.off('exit', kill);
      child.stdin?.end();
      setTimeout(kill, 2000).unref();
    },
  };
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      sim.status = JSON.parse(line) as SimStatus;
    } catch {
      // not a status line
    }
  });
  return sim;
}

/** CPU seconds (user + system) of a process from /proc/<pid>/stat (clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function rssMiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const total = (sims: Sim[], key: 'welcomed' | 'acks' | 'ended'): number => sims.reduce((sum, s) => sum + s.status[key], 0);

async function run(): Promise<SectionReport> {
  const max = Math.max(...LEVELS);
  // The helper inherits the environment; this is how it learns how many identities to make.
  process.env.BENCH_AGENTS_MAX = String(max);
  const server = await startChild<AgentsServerInfo>(fileURLToPath(new URL('./agents-server.ts', import.meta.url)), {
    readyTimeoutMs: 120_000,
  });
  const simScript = fileURLToPath(new URL('./agents-sim.ts', import.meta.url));
  const share = Math.ceil(max / SIM_PROCESSES);
  const sims = Array.from({ length: SIM_PROCESSES }, (_, i) =>
    startSim(simScript, server.info.port, server.info.identities, i * share, Math.min(max, (i + 1) * share)),
  );
  const interval = server.info.reportIntervalMs;
  // Two report intervals: every agent reports twice and the store is flushed twice.
  const windowMs = 2 * interval;
  const rows: string[][] = [];
  const notes: string[] = [];
  let reached = 0;
  let cpuAtTarget: number | null = null;
  let deliveredAtTarget = 1;
  try {
    for (const level of LEVELS) {
      sims.forEach((sim, i) => sim.process.stdin!.write(`grow ${Math.max(0, Math.min(share, level - i * share))}\n`));
      const connectStart = Date.now();
      while (total(sims, 'welcomed') < level && Date.now() - connectStart < CONNECT_TIMEOUT_MS) await sleep(250);
      const welcomed = total(sims, 'welcomed');
      if (welcomed < level) {
        notes.push(`stopped at ${fmtInt(level)}: only ${fmtInt(welcomed)} sessions opened within ${CONNECT_TIMEOUT_MS / 1000} s (${sims.map((s) => s.status.lastError).find(Boolean) ?? 'no error'})`);
        break;
      }
      const connectSeconds = (Date.now() - connectStart) / 1000;
      await sleep(interval); // every new agent has started reporting
      const cpu0 = server.cpuSeconds();
      const simCpu0 = sims.reduce((sum, sim) => sum + cpuSeconds(sim.process.pid!), 0);
      const acks0 = total(sims, 'acks');
      const t0 = performance.now();
      await sleep(windowMs);
      const seconds = (performance.now() - t0) / 1000;
      const cpu1 = server.cpuSeconds();
      const simCores = (sims.reduce((sum, sim) => sum + cpuSeconds(sim.process.pid!), 0) - simCpu0) / seconds;
      const acks = total(sims, 'acks') - acks0;
      const cores = cpu0 === null || cpu1 === null ? Number.NaN : (cpu1 - cpu0) / seconds;
      const ended = total(sims, 'ended');
      // Each agent sends 2 messages per interval; fewer arriving means the simulators fell behind.
      const delivered = acks / seconds / (level / (interval / 1000));
      rows.push([
        fmtInt(level),
        fmtInt(welcomed - ended),
        `${(cores * 100).toFixed(1)}%`,
        rssMiB(server.pid).toFixed(0),
        fmtInt((acks * 2) / seconds),
        `${(delivered * 100).toFixed(0)}%`,
        fmtInt((acks * 8) / seconds),
        connectSeconds.toFixed(1),
        `${(simCores * 100).toFixed(0)}%`,
      ]);
      if (delivered < 0.9) {
        notes.push(`N=${fmtInt(level)}: only ${(delivered * 100).toFixed(0)}% of the offered reports arrived in the window (simulators or the server fell behind)`);
      }
      if (ended > 0) notes.push(`${ended} sessions ended early at N=${level} (${sims.map((s) => s.status.lastError).find(Boolean) ?? 'no error'})`);
      reached = level;
      if (level === TARGET_AGENTS) {
        cpuAtTarget = cores;
        deliveredAtTarget = delivered;
      }
    }
  } finally {
    for (const sim of sims) sim.stop();
    await server.stop();
  }

  const details = [
    `Each agent: one Connect stream, a heartbeat and a telemetry message of 8 GPUs every ${interval} ms`,
    `(the default report interval), acked per heartbeat; ${SIM_PROCESSES} simulator processes, 50 streams per connection.`,
    `CPU and RSS are the control plane's gateway process; measured over ${windowMs / 1000} s per N after one interval of settling.`,
    '',
    ...table(['agents', 'live sessions', 'CPU (1 core=100%)', 'RSS MiB', 'messages/s', 'of offered', 'GPU samples/s', 'connect s', 'simulators CPU'], rows),
    ...(notes.length > 0 ? ['', ...notes] : []),
  ];
  const target = `target: ${fmtInt(TARGET_AGENTS)} agents within ${TARGET_CORES} core`;
  if (cpuAtTarget === null) {
    return { verdict: 'MISS', summary: `reached ${fmtInt(reached)} agents (${target})`, details };
  }
  // A window where not every report arrived understates the cost: judge the cost scaled to the full rate.
  const fullRate = deliveredAtTarget < 0.9 ? cpuAtTarget / deliveredAtTarget : cpuAtTarget;
  const ok = fullRate < TARGET_CORES;
  const scaled = fullRate === cpuAtTarget ? '' : `, ${(fullRate * 100).toFixed(1)}% scaled to every report arriving`;
  return {
    verdict: ok ? 'PASS' : 'MISS',
    summary: `${fmtInt(TARGET_AGENTS)} agents at ${(cpuAtTarget * 100).toFixed(1)}% of one core${scaled} (${target})`,
    details,
  };
}
