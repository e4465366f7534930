// The agent <-> control-plane protocol lives here (the .proto files and their loader).
// The node-agent work adds it; until then the package only reserves its place.
export const PROTOCOL_PACKAGE = 'svc.agent.v1';
