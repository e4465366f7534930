// The agent <-> control-plane protocol: the .proto loaded at run time, its generated
// TypeScript types (proto/generated, built by scripts/gen-proto-types.mjs, not
// committed) and the protocol version.
export { loadAgentProto, LOADER_OPTIONS, PROTO_PATH } from './load.js';

/** Bump with every change to agent.proto and add a line to CHANGELOG.md. */
export const PROTOCOL_VERSION = 8;
/** The oldest agent protocol the control plane still accepts. */
export const MIN_PROTOCOL_VERSION = 1;

export type { ProtoGrpcType } from '../generated/agent.js';
export type { AgentGatewayClient } from '../generated/svc/agent/v1/AgentGateway.js';
export type { AgentGatewayHandlers } from '../generated/svc/agent/v1/AgentGateway.js';
export type { AgentMessage, AgentMessage__Output } from '../generated/svc/agent/v1/AgentMessage.js';
export type { ControlMessage, ControlMessage__Output } from '../generated/svc/agent/v1/ControlMessage.js';
export type { EnrollRequest, EnrollRequest__Output } from '../generated/svc/agent/v1/EnrollRequest.js';
export type { EnrollResponse, EnrollResponse__Output } from '../generated/svc/agent/v1/EnrollResponse.js';
export type { Hello__Output } from '../generated/svc/agent/v1/Hello.js';
export type { HostFacts, HostFacts__Output } from '../generated/svc/agent/v1/HostFacts.js';
export type { GpuSample, GpuSample__Output } from '../generated/svc/agent/v1/GpuSample.js';
export type { GpuTelemetry__Output } from '../generated/svc/agent/v1/GpuTelemetry.js';
export type { HealthEvent, HealthEvent__Output } from '../generated/svc/agent/v1/HealthEvent.js';
export type { TaskState, TaskState__Output } from '../generated/svc/agent/v1/TaskState.js';
export type { InstanceAccess, InstanceAccess__Output } from '../generated/svc/agent/v1/InstanceAccess.js';
export type { Command, Command__Output } from '../generated/svc/agent/v1/Command.js';
export type { StartTask__Output } from '../generated/svc/agent/v1/StartTask.js';
export type { StopTask__Output } from '../generated/svc/agent/v1/StopTask.js';
export type { CommandResult__Output } from '../generated/svc/agent/v1/CommandResult.js';
