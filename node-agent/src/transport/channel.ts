// The gRPC client for the control plane: channel credentials (TLS with a configurable CA,
// optional client certificate for mutual TLS, plaintext only on loopback — enforced by
// the config) and the keepalive policy of the long-lived stream.
//
// Keepalive: a ping every 15 s while a call is open, and the connection is declared dead
// when a ping is not answered within 5 s, so a control plane that vanished without a FIN
// (host crash, NAT timeout) ends the session within ~20 s and the reconnect loop takes
// over. Reconnecting is the session loop's job: calls do not wait for the channel to be
// ready, they fail fast with UNAVAILABLE.
//
// Messages are bounded both ways (SVC_AGENT_GRPC_MAX_MESSAGE_BYTES): grpc-js would send
// without limit, and a peer's oversized message fails its call instead of being buffered.
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { loadAgentProto, type AgentGatewayClient } from '@svc/proto';
import { ConfigError } from '@svc/shared';
import type { AgentConfig } from '../config/agent-config.js';

export const KEEPALIVE_OPTIONS: grpc.ChannelOptions = {
  'grpc.keepalive_time_ms': 15_000,
  'grpc.keepalive_timeout_ms': 5_000,
  'grpc.keepalive_permit_without_calls': 0,
  // The channel's own reconnect backoff stays short; the session loop owns the policy.
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1_000,
};

type TransportConfig = Pick<AgentConfig, 'controlPlane' | 'useTls' | 'tlsCa' | 'tlsCert' | 'tlsKey' | 'tlsServerName' | 'grpcMaxMessageBytes'>;

/** Channel options of the agent's stream: keepalive and message bounds. */
export function channelOptions(config: Pick<TransportConfig, 'useTls' | 'tlsServerName' | 'grpcMaxMessageBytes'>): grpc.ChannelOptions {
  const options: grpc.ChannelOptions = {
    ...KEEPALIVE_OPTIONS,
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

export function createGatewayClient(config: TransportConfig): AgentGatewayClient {
  const proto = loadAgentProto();
  return new proto.svc.agent.v1.AgentGateway(config.controlPlane, channelCredentials(config), channelOptions(config));
}
