// Throwaway TLS material for tests, made with the openssl CLI: a CA, a server certificate
// for localhost/127.0.0.1 and a client certificate signed by it, plus a second CA that
// signed nothing (to prove verification fails).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCertificates {
  dir: string;
  ca: string;
  otherCa: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

export function makeTestCertificates(): TestCertificates {
  const dir = mkdtempSync(join(tmpdir(), 'test-certs-'));
  const openssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'pipe', timeout: 60_000 });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const makeCa = (name: string): void => openssl('req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '1', '-subj', `/CN=${name}`);
  const issue = (name: string, ext: string): void => {
    openssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    writeFileSync(join(dir, `${name}.ext`), `${ext}\n`);
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', '1', '-extfile', `${name}.ext`);
  };
  makeCa('ca');
  makeCa('other-ca');
  issue('server', 'subjectAltName=DNS:localhost,IP:127.0.0.1');
  issue('agent', 'basicConstraints=CA:FALSE');
  const path = (name: string) => join(dir, name);
  return {
    dir,
    ca: path('ca.pem'),
    otherCa: path('other-ca.pem'),
    serverCert: path('server.pem'),
    serverKey: path('server.key'),
    clientCert: path('agent.pem'),
    clientKey: path('agent.key'),
  };
}
