// The node agent: gRPC session to the control plane, NVML health and telemetry, host
// facts; the Docker runtime, SSH gateway and model-server supervisor come next.
export { startAgent, AGENT_VERSION, type RunningAgent } from './agent.js';
export { loadAgentConfig, agentSettings, type AgentConfig } from './config/agent-config.js';
