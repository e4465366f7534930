// One HTTP health check of a model server: GET http://endpoint/healthPath, healthy on 200.
// The answer says why not otherwise (status, refused connection, timeout), for the
// replica's message.

export interface ProbeResult {
  ok: boolean;
  /** '' when ok; otherwise what went wrong, e.g. "HTTP 503" or "connect ECONNREFUSED". */
  detail: string;
}

export type HealthProbe = (url: string, timeoutMs: number, signal?: AbortSignal) => Promise<ProbeResult>;

export const httpHealthProbe: HealthProbe = async (url, timeoutMs, signal) => {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const res = await fetch(url, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout, redirect: 'manual' });
    // Free the connection; the body of a health answer is not needed.
    await res.body?.cancel().catch(() => undefined);
    return res.status === 200 ? { ok: true, detail: '' } : { ok: false, detail: `health check answered HTTP ${res.status}` };
  } catch (err) {
    if (timeout.aborted) return { ok: false, detail: `health check timed out after ${timeoutMs} ms` };
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return { ok: false, detail: `health check failed: ${cause?.code ?? cause?.message ?? (err as Error).message}` };
  }
};

/** `host:port`, with IPv6 hosts in brackets: what TaskState.endpoint carries. */
export function endpointOf(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}
