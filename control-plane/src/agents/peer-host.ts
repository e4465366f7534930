// The host part of a gRPC peer string, the address a cap per client is keyed by.
// grpc-js names a TCP peer "host:port", an IPv6 one "[host]:port", and may prefix a scheme
// ("ipv4:", "ipv6:"); a Unix socket peer is kept whole.

export function peerHost(peer: string): string {
  const bare = peer.replace(/^ipv[46]:/, '');
  if (bare.startsWith('unix:')) return bare;
  if (bare.startsWith('[')) {
    const close = bare.indexOf(']');
    return close > 0 ? bare.slice(1, close) : bare;
  }
  const colon = bare.lastIndexOf(':');
  // More than one colon and no brackets: an IPv6 address without a port.
  return colon > 0 && bare.indexOf(':') === colon ? bare.slice(0, colon) : bare;
}
