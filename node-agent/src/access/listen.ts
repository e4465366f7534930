// Starts a TCP listener (the SSH gateway, the Jupyter proxy) and answers with the port it
// got, so port 0 works; a port already taken fails with a message naming the listener.
import type { AddressInfo } from 'node:net';

interface Listenable {
  listen(port: number, host: string, callback: () => void): unknown;
  address(): AddressInfo | string | null;
  once(event: 'error', listener: (err: Error) => void): unknown;
  off(event: 'error', listener: (err: Error) => void): unknown;
}

export function listenOn(server: Listenable, port: number, host: string, what: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const fail = (err: Error): void => reject(new Error(`the ${what} cannot listen on ${host}:${port}: ${err.message}`));
    server.once('error', fail);
    server.listen(port, host, () => {
      server.off('error', fail);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
