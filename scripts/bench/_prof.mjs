import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
function start(script, env = {}, args = []) {
  const c = spawn(process.execPath, [...args, '--import', 'tsx', script], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  return new Promise((res) => createInterface({ input: c.stdout }).once('line', (l) => res({ c, info: JSON.parse(l) })));
}
const up = await start('scripts/bench/upstream-server.ts');
const cp = await start('scripts/bench/inference-server.ts', { BENCH_REPLICAS: JSON.stringify([{ baseUrl: up.info.baseUrl, model: 'llama-3.1-8b-instruct', quantization: 'int4', image: 'x' }]) }, ['--cpu-prof', '--cpu-prof-dir=/tmp/prof']);
const body = JSON.stringify({ model: 'llama-3.1-8b-instruct', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });
const r = await autocannon({ url: `http://127.0.0.1:${cp.info.port}/v1/chat/completions`, method: 'POST', body, headers: { 'content-type': 'application/json', authorization: `Bearer ${cp.info.key}` }, connections: 32, duration: 15 });
console.log('rps', r.requests.average, 'non2xx', r.non2xx, 'errors', r.errors, r.statusCodeStats);
cp.c.stdin.end(); up.c.stdin.end();
await new Promise((r) => cp.c.once('exit', r));
