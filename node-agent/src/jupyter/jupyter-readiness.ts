// `ready` means Jupyter answers where users will reach it (docs/ssh-jupyter.md): the agent
// asks the instance's Jupyter API through the instance's own proxy listener, with its
// token, until it answers 200 or the start bound passes. An image that runs its own
// Jupyter needs this most: its process is up seconds before it serves.

export interface ReadinessProbe {
  /** The instance's base URL on its proxy listener, e.g. http://127.0.0.1:8917/inst_x/. */
  baseUrl: string;
  token: string;
  /** Epoch ms after which it counts as not answering. */
  deadline: number;
  /** False once the instance is gone: waiting stops. */
  stillWanted: () => boolean;
  now?: () => number;
  intervalMs?: number;
}

export type Readiness = { ok: true } | { ok: false; lastAnswer: string };

export async function waitUntilJupyterAnswers(probe: ReadinessProbe): Promise<Readiness> {
  const now = probe.now ?? Date.now;
  let lastAnswer = 'no answer';
  for (;;) {
    try {
      // The server answering is the tenant's (an image may run its own Jupyter): a redirect
      // is not followed (it had the agent fetch, from the host, any address the tenant named,
      // and tell it the status), and the body, which nothing here needs, is not read (an
      // endless one had taken the agent from 94 MiB to 1.7 GiB in one probe).
      const res = await fetch(`${probe.baseUrl}api`, { headers: { authorization: `token ${probe.token}` }, redirect: 'manual', signal: AbortSignal.timeout(2_000) });
      await res.body?.cancel().catch(() => undefined);
      if (res.status === 200) return { ok: true };
      lastAnswer = `HTTP ${res.status}`;
    } catch (err) {
      lastAnswer = (err as Error).message;
    }
    if (!probe.stillWanted()) return { ok: false, lastAnswer: 'the instance is gone' };
    if (now() >= probe.deadline) return { ok: false, lastAnswer };
    await new Promise((r) => setTimeout(r, probe.intervalMs ?? 250));
  }
}
