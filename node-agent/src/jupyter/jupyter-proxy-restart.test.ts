// An agent restart keeps every instance's Jupyter port (its URL and browser origin), also
// for two instances whose derived first ports collide and that come back in the other
// order. Over real listeners, with the port memory in a temporary data dir.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AccessRegistry } from '../access/access-registry.js';
import { portCandidates } from './jupyter-origin.js';
import type { JupyterProxy } from './jupyter-proxy.js';
import { loopbackJupyterProxy } from '../testing/loopback-jupyter-proxy.js';
import { JupyterPortMemory } from './port-memory.js';

const range = { first: 20_000 + Math.floor(Math.random() * 10_000), count: 20 };
const dataDir = mkdtempSync(join(tmpdir(), 'jupyter-ports-'));
const file = join(dataDir, 'jupyter-ports.json');
const proxies: JupyterProxy[] = [];

afterEach(async () => {
  for (const p of proxies.splice(0)) await p.closeAll();
});

function agentProxy(memory: JupyterPortMemory): JupyterProxy {
  const proxy = loopbackJupyterProxy({ registry: new AccessRegistry(), ports: range, limits: { maxConnections: 100, maxConnectionsPerSource: 100 }, memory });
  proxies.push(proxy);
  return proxy;
}

/** Two instance ids whose derived first port is the same. */
function collidingIds(): [string, string] {
  const firstOf = new Map<number, string>();
  for (let i = 0; ; i++) {
    const id = `inst_${i}`;
    const first = portCandidates(range, id)[0]!;
    const other = firstOf.get(first);
    if (other) return [other, id];
    firstOf.set(first, id);
  }
}

describe('Jupyter ports across an agent restart', () => {
  it('gives each instance its old port back whatever order they come back in, and forgets an instance that is gone', async () => {
    const [a, b] = collidingIds();
    const before = agentProxy(new JupyterPortMemory(file));
    const portA = (await before.open(a)).port;
    const portB = (await before.open(b)).port;
    expect(portA).not.toBe(portB);
    await before.closeAll(); // the agent stops

    const after = agentProxy(new JupyterPortMemory(file));
    expect((await after.open(b)).port).toBe(portB); // B first this time: derived ports alone would give it A's
    expect((await after.open(a)).port).toBe(portA);

    await after.close(a); // A is gone
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ [b]: portB });
  });

  it('still opens the port when the memory cannot be written (the data dir path is a file)', async () => {
    writeFileSync(join(dataDir, 'not-a-dir'), '');
    const proxy = agentProxy(new JupyterPortMemory(join(dataDir, 'not-a-dir', 'jupyter-ports.json')));
    const { port } = await proxy.open('inst_unsaved');
    expect(portCandidates(range, 'inst_unsaved')).toContain(port);
    const res = await fetch(`http://127.0.0.1:${port}/inst_unsaved/`);
    expect(res.status).toBe(404); // the listener answers (no such instance registered)
    await res.arrayBuffer();
  });
});

process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }));
