// Reading what a container says, through the engine's API.
import type Docker from 'dockerode';

/**
 * A container's log or an exec's output as the engine returns it without a TTY: each
 * chunk framed with an 8-byte header (stream, 3 bytes of nothing, a 32-bit big-endian
 * size). The text inside, in order.
 */
export function unframeDockerLog(framed: Buffer): string {
  const parts: Buffer[] = [];
  for (let at = 0; at + 8 <= framed.length; ) {
    const size = framed.readUInt32BE(at + 4);
    parts.push(framed.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return Buffer.concat(parts).toString('utf8');
}

/** Runs `cmd` in the container (docker exec); its stdout and stderr together. */
export async function execIn(docker: Docker, containerId: string, cmd: string[]): Promise<string> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({});
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  await new Promise((r) => stream.on('end', r));
  return unframeDockerLog(Buffer.concat(chunks));
}

/** Waits until the container's log (stdout and stderr) holds `text`. */
export async function waitForLog(docker: Docker, containerId: string, text: string, timeoutMs = 10_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    if (unframeDockerLog(await docker.getContainer(containerId).logs({ stdout: true, stderr: true })).includes(text)) return;
  }
  throw new Error(`${containerId} did not log "${text}" within ${timeoutMs} ms`);
}
