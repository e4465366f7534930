// The node agent: gRPC session to the control plane, Docker runtime, SSH gateway,
// model-server supervisor, NVML + host telemetry. Built by the node-agent issue.
export {};
