// Loads agent.proto at run time with @grpc/proto-loader. The options here must match
// the ones scripts/gen-proto-types.mjs passes to proto-loader-gen-types, because the
// generated TypeScript types describe the objects these options produce.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType } from '../generated/agent.js';

export const PROTO_PATH = fileURLToPath(new URL('../agent.proto', import.meta.url));

/** Shared with the type generator: keep in step. */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
  objects: false,
  oneofs: true,
};

let cached: ProtoGrpcType | undefined;

export function loadAgentProto(): ProtoGrpcType {
  cached ??= grpc.loadPackageDefinition(protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS)) as unknown as ProtoGrpcType;
  return cached;
}
