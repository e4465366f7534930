// How the agent gateway listens: TLS with a configured certificate and key (and, for
// mutual TLS, a CA that must sign every agent's client certificate), or plaintext — but
// plaintext only on a loopback address, where nobody else can read node secrets.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { ConfigError } from '@svc/shared';

export interface TransportSettings {
  grpcHost: string;
  grpcTlsCert: string;
  grpcTlsKey: string;
  grpcTlsCa: string;
  grpcMutualTls: boolean;
}

export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare);
}

export type TransportPlan =
  | { tls: false }
  | { tls: true; certPath: string; keyPath: string; caPath: string | null; mutual: boolean };

/** Pure: which transport the settings ask for, or a ConfigError saying what to fix. */
export function planTransport(s: TransportSettings): TransportPlan {
  if (Boolean(s.grpcTlsCert) !== Boolean(s.grpcTlsKey)) {
    throw new ConfigError('SVC_GRPC_TLS_CERT and SVC_GRPC_TLS_KEY must be set together (the certificate and its private key)');
  }
  if (s.grpcMutualTls && !s.grpcTlsCa) {
    throw new ConfigError('SVC_GRPC_MUTUAL_TLS=true needs SVC_GRPC_TLS_CA: the CA that signs agent client certificates');
  }
  if (!s.grpcTlsCert) {
    if (s.grpcMutualTls) throw new ConfigError('SVC_GRPC_MUTUAL_TLS=true needs TLS: set SVC_GRPC_TLS_CERT and SVC_GRPC_TLS_KEY');
    if (!isLoopbackHost(s.grpcHost)) {
      throw new ConfigError(
        `SVC_GRPC_HOST=${s.grpcHost} is not a loopback address, and plaintext gRPC is allowed only on loopback ` +
          '(127.0.0.1, ::1, localhost): set SVC_GRPC_TLS_CERT and SVC_GRPC_TLS_KEY, or listen on 127.0.0.1',
      );
    }
    return { tls: false };
  }
  return { tls: true, certPath: s.grpcTlsCert, keyPath: s.grpcTlsKey, caPath: s.grpcTlsCa || null, mutual: s.grpcMutualTls };
}

function readPem(path: string, setting: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`cannot read ${setting} ${path}: ${(err as Error).message}`);
  }
}

export function serverCredentials(settings: TransportSettings): grpc.ServerCredentials {
  const plan = planTransport(settings);
  if (!plan.tls) return grpc.ServerCredentials.createInsecure();
  const cert = readPem(plan.certPath, 'SVC_GRPC_TLS_CERT');
  const key = readPem(plan.keyPath, 'SVC_GRPC_TLS_KEY');
  const ca = plan.caPath ? readPem(plan.caPath, 'SVC_GRPC_TLS_CA') : null;
  try {
    return grpc.ServerCredentials.createSsl(ca, [{ cert_chain: cert, private_key: key }], plan.mutual);
  } catch (err) {
    throw new ConfigError(`the gRPC TLS certificate, key or CA is not usable: ${(err as Error).message}`);
  }
}
