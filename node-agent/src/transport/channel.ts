// The gRPC client for the control plane: channel credentials (TLS with a configurable CA,
// optional client certificate for mutual TLS, plaintext only on loopback — enforced by
// the config) and the keepalive policy of the long-lived stream.
//
// Keepalive: an HTTP/2 ping every SVC_AGENT_KEEPALIVE_MS (5 s) while the stream is open,
// and the connection is declared dead when a ping is not answered within
// SVC_AGENT_KEEPALIVE_TIMEOUT_MS (3 s), so a control plane that vanished without a FIN
// (host crash, partition, NAT timeout) ends the session within ~8 s and the reconnect
// loop takes over. Reconnecting is the session loop's job: every attempt dials a fresh
// channel with its own connection (transport/dialer.ts), so a TCP connect stuck in SYN
// retransmits from the partition is dropped, not waited on.
//
// Messages are bounded both ways (SVC_AGENT_GRPC_MAX_MESSAGE_BYTES): grpc-js would send
// without limit, and a peer's oversized message fails its call instead of being buffered.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { loadAgentProto, type AgentGatewayClient } from '@svc/proto';
import { ConfigError } from '@svc/shared';
import type { AgentConfig } from '../config/agent-config.js';

/** Used where a caller leaves the keepalive settings out (the settings' defaults). */
export const DEFAULT_KEEPALIVE = { keepaliveMs: 5_000, keepaliveTimeoutMs: 3_000 };

export type TransportConfig = Pick<AgentConfig, 'controlPlane' | 'useTls' | 'tlsCa' | 'tlsCert' | 'tlsKey' | 'tlsServerName' | 'grpcMaxMessageBytes'> &
  Partial<Pick<AgentConfig, 'keepaliveMs' | 'keepaliveTimeoutMs'>>;

/** The keepalive policy of the long-lived stream (pure). */
export function keepaliveOptions(config: Partial<Pick<AgentConfig, 'keepaliveMs' | 'keepaliveTimeoutMs'>>): grpc.ChannelOptions {
  return {
    'grpc.keepalive_time_ms': config.keepaliveMs ?? DEFAULT_KEEPALIVE.keepaliveMs,
    'grpc.keepalive_timeout_ms': config.keepaliveTimeoutMs ?? DEFAULT_KEEPALIVE.keepaliveTimeoutMs,
    // Pings only while the Connect stream is open; between attempts there is no connection.
    'grpc.keepalive_permit_without_calls': 0,
    // The channel's own reconnect backoff stays short; the session loop owns the policy.
    'grpc.initial_reconnect_backoff_ms': 100,
    'grpc.max_reconnect_backoff_ms': 1_000,
    // Each channel gets its own connection: closing it drops a connect stuck in a partition
    // instead of leaving it in the process-wide pool for the next channel to wait on.
    'grpc.use_local_subchannel_pool': 1,
  };
}

/** Channel options of the agent's stream: keepalive and message bounds. */
export function channelOptions(config: Pick<TransportConfig, 'useTls' | 'tlsServerName' | 'grpcMaxMessageBytes' | 'keepaliveMs' | 'keepaliveTimeoutMs'>): grpc.ChannelOptions {
  const options: grpc.ChannelOptions = {
    ...keepaliveOptions(config),
    'grpc.max_receive_message_length': config.grpcMaxMessageBytes,
    'grpc.max_send_message_length': config.grpcMaxMessageBytes,
  };
  if (config.useTls && config.tlsServerName) options['grpc.ssl_target_name_override'] = config.tlsServerName;
  return options;
}

function readPem(path: string, setting: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`cannot read ${setting} ${path}: ${(err as Error).message}`);
  }
}

export function channelCredentials(config: TransportConfig): grpc.ChannelCredentials {
  if (!config.useTls) return grpc.credentials.createInsecure();
  const ca = config.tlsCa ? readPem(config.tlsCa, 'SVC_AGENT_TLS_CA') : null;
  const key = config.tlsKey ? readPem(config.tlsKey, 'SVC_AGENT_TLS_KEY') : null;
  const cert = config.tlsCert ? readPem(config.tlsCert, 'SVC_AGENT_TLS_CERT') : null;
  return grpc.credentials.createSsl(ca, key, cert);
}

/** A client of one control-plane address (`target`, default SVC_CONTROL_PLANE as given). */
export function createGatewayClient(config: TransportConfig, target: string = config.controlPlane, credentials: grpc.ChannelCredentials = channelCredentials(config)): AgentGatewayClient {
  const proto = loadAgentProto();
  return new proto.svc.agent.v1.AgentGateway(target, credentials, channelOptions(config));
}
