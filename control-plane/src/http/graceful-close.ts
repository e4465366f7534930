// Stopping the control plane without losing what it served. app.close() refuses new
// requests at once (installClosingGuard) and waits for those in flight, but it waits
// without end: one long stream, or a client that stops reading, holds the process until a
// supervisor's SIGKILL (Kubernetes after 30 s, the workers' primary after the drain plus
// 10 s), and a SIGKILL writes nothing: the streams still open and the last usage batch go
// unbilled. So the drain has a deadline. Past it, every connection still open is closed;
// each stream's relay then ends as for a client that left (its usage recorded from what
// the replica reported), and the inference service's close waits for those records
// before the store closes.
import type { FastifyInstance } from 'fastify';

export async function closeGracefully(app: FastifyInstance, drainMs: number, log: { warn(obj: object, msg: string): void }): Promise<void> {
  const deadline = setTimeout(() => {
    app.server.getConnections((_err, open) => {
      log.warn({ drain_ms: drainMs, open_connections: open }, 'drain deadline passed; closing the connections still open');
      app.server.closeAllConnections();
    });
  }, drainMs);
  deadline.unref();
  try {
    await app.close();
  } finally {
    clearTimeout(deadline);
  }
}
