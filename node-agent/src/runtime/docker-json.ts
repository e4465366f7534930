// A JSON answer of the Docker engine read with a bound on its size. dockerode reads every
// answer whole and turns it into one string inside an event handler: an answer past V8's
// longest string (an image whose config carries 600 MB of labels, which a tenant's
// registry can serve) threw where nothing could catch it, and the agent exited, then
// again at every image-GC pass after its restart, the image still on the node. Read here,
// an answer past the bound is an ordinary error about that one image.
import { request } from 'node:http';
import type Docker from 'dockerode';

/**
 * The most of an instance's image description the agent reads: configs are a few KiB; one
 * of 600 MB of labels had made the agent exit.
 */
export const MAX_IMAGE_ANSWER_BYTES = 8 * 1024 * 1024;

export class DockerAnswerTooLarge extends Error {
  override readonly name = 'DockerAnswerTooLarge';
}

interface ModemTarget {
  /** A path, or (docker-modem's default) a function that finds one. */
  socketPath?: string | (() => string | Promise<string>);
  host?: string;
  port?: number | string;
  version?: string;
}

/** GET `path` (e.g. `/images/<ref>/json`) from the engine `docker` talks to; at most `maxBytes` of answer. */
export async function dockerJson<T>(docker: Docker, path: string, maxBytes: number): Promise<{ status: number; body: T | undefined }> {
  const modem = docker.modem as unknown as ModemTarget;
  const versioned = modem.version ? `/${modem.version.replace(/^v?/, 'v')}${path}` : path;
  const socketPath = typeof modem.socketPath === 'function' ? await modem.socketPath() : modem.socketPath;
  return new Promise((resolve, reject) => {
    const req = request(
      socketPath ? { socketPath, path: versioned } : { host: modem.host, port: modem.port, path: versioned },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxBytes) {
            res.destroy();
            reject(new DockerAnswerTooLarge(`the engine's answer to ${path} is larger than ${maxBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as T) : undefined });
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}
