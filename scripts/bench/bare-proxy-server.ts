// A bench helper process: the least a Node HTTP gateway can do — accept the request, send
// its body to the upstream over a keep-alive pool (undici, as the control plane does) and
// relay the answer; no auth, no validation, no routing, no records. It shows how much of
// the control plane's overhead is simply being a proxy in Node. Prints {port}.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { serveUntilStopped } from './helper-process.js';

const upstream = process.env.BENCH_UPSTREAM;
if (!upstream) throw new Error('BENCH_UPSTREAM must name the upstream base URL');
const pool = new Pool(upstream, { connections: 64 });

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    pool.request({ path: req.url ?? '/', method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) }).then(
      async (up) => {
        const body = Buffer.from(await up.body.arrayBuffer());
        res.writeHead(up.statusCode, { 'content-type': 'application/json', 'content-length': body.length });
        res.end(body);
      },
      () => {
        res.writeHead(502).end();
      },
    );
  });
});
server.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
serveUntilStopped({ port: (server.address() as AddressInfo).port }, async () => {
  server.close();
  await pool.close();
});
