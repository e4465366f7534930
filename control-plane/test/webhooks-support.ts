// Test support for webhook suites: a real HTTP receiver on 127.0.0.1 that verifies
// every delivery with the `standardwebhooks` library, and a wait-until helper.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedRequest {
  webhookId: string;
  timestamp: string;
  signature: string;
  body: string;
  event: { id: string; type: string; created: number; data: any };
  /** The secrets (by value) this request verified with; empty means forged or broken. */
  verifiedWith: string[];
  /** What the receiver answered; null while it hangs. */
  answered: number | null;
}

/** What to answer: a status (with headers), or hang without answering. */
export type Answer = { status: number; headers?: Record<string, string> } | 'hang';

export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  /** Secrets every request is verified with; set after creating the subscription. */
  secrets: string[] = [];
  /** Decides the answer to each request; 200 by default. */
  answer: (request: ReceivedRequest) => Answer = () => ({ status: 200 });
  private server: Server | undefined;
  private readonly hanging = new Set<ServerResponse>();
  port = 0;

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await receiver.listen();
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** Starts (again) on the same port. */
  async listen(): Promise<void> {
    const server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** Stops listening: senders now get ECONNREFUSED. Hanging requests are cut. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const res of this.hanging) res.destroy();
    this.hanging.clear();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Requests answered with a 2xx. */
  delivered(): ReceivedRequest[] {
    return this.requests.filter((r) => r.answered !== null && r.answered >= 200 && r.answered < 300);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = {
        'webhook-id': String(req.headers['webhook-id'] ?? ''),
        'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
        'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
      };
      const verifiedWith = this.secrets.filter((secret) => {
        try {
          new Webhook(secret).verify(body, headers);
          return true;
        } catch {
          return false;
        }
      });
      const request: ReceivedRequest = {
        webhookId: headers['webhook-id'],
        timestamp: headers['webhook-timestamp'],
        signature: headers['webhook-signature'],
        body,
        event: JSON.parse(body),
        verifiedWith,
        answered: null,
      };
      this.requests.push(request);
      if (req.headers['content-type'] !== 'application/json' || verifiedWith.length === 0) {
        request.answered = 400;
        res.writeHead(400).end('signature does not verify');
        return;
      }
      const answer = this.answer(request);
      if (answer === 'hang') {
        this.hanging.add(res);
        return;
      }
      request.answered = answer.status;
      res.writeHead(answer.status, answer.headers).end();
    });
  }
}

/** Polls `check` until it returns true; fails with `what` after `timeoutMs`. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
