import { describe, expect, it } from 'vitest';
import { isLoopbackHost, planTransport, serverCredentials } from './transport.js';

const base = { grpcHost: '127.0.0.1', grpcTlsCert: '', grpcTlsKey: '', grpcTlsCa: '', grpcMutualTls: false };

describe('transport', () => {
  it('knows loopback addresses', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST']) expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '128.0.0.1']) expect(isLoopbackHost(host), host).toBe(false);
  });

  it('allows plaintext on loopback and refuses it elsewhere', () => {
    expect(planTransport(base)).toEqual({ tls: false });
    expect(() => planTransport({ ...base, grpcHost: '0.0.0.0' })).toThrow(/SVC_GRPC_HOST=0.0.0.0 is not a loopback address/);
  });

  it('plans TLS and mutual TLS and names what is missing', () => {
    const tls = { ...base, grpcHost: '0.0.0.0', grpcTlsCert: 'c.pem', grpcTlsKey: 'k.pem' };
    expect(planTransport(tls)).toEqual({ tls: true, certPath: 'c.pem', keyPath: 'k.pem', caPath: null, mutual: false });
    expect(planTransport({ ...tls, grpcTlsCa: 'ca.pem', grpcMutualTls: true })).toMatchObject({ mutual: true, caPath: 'ca.pem' });
    expect(() => planTransport({ ...tls, grpcTlsKey: '' })).toThrow(/must be set together/);
    expect(() => planTransport({ ...tls, grpcMutualTls: true })).toThrow(/needs SVC_GRPC_TLS_CA/);
    expect(() => planTransport({ ...base, grpcTlsCa: 'ca.pem', grpcMutualTls: true })).toThrow(/needs TLS/);
  });

  it('names an unreadable certificate file', () => {
    expect(() => serverCredentials({ ...base, grpcTlsCert: '/nonexistent/c.pem', grpcTlsKey: '/nonexistent/k.pem' })).toThrow(
      /cannot read SVC_GRPC_TLS_CERT \/nonexistent\/c.pem/,
    );
  });
});
