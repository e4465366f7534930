// The helper side of child.ts's contract: announce readiness with one JSON line on stdout,
// then run until stdin closes (the bench's cue, which also fires if the bench dies) or a
// signal arrives, close what the helper holds, and exit.
export function serveUntilStopped(info: unknown, close: () => Promise<void>): void {
  process.stdout.write(`${JSON.stringify(info)}\n`);
  let closing = false;
  const shutdown = async (): Promise<void> => {
    if (closing) return;
    closing = true;
    try {
      await close();
    } finally {
      // An explicit exit also makes `node --cpu-prof` write its profile.
      process.exit(0);
    }
  };
  process.stdin.on('end', () => void shutdown());
  process.stdin.resume();
  process.on('SIGTERM', () => void shutdown());
  process.on('SIGINT', () => void shutdown());
}
