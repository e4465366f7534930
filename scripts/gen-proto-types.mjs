// Generates TypeScript types for proto/agent.proto into proto/generated (not committed)
// when they are missing or older than the .proto. Run by ensure-deps before start,
// test, bench and typecheck. The flags mirror LOADER_OPTIONS in proto/src/load.ts.
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const protoFile = join(root, 'proto', 'agent.proto');
const outDir = join(root, 'proto', 'generated');
const marker = join(outDir, 'agent.ts');

if (!existsSync(marker) || statSync(marker).mtimeMs < statSync(protoFile).mtimeMs) {
  // The proto workspace's own proto-loader (dockerode hoists an older one to the root).
  const requireFromProto = createRequire(join(root, 'proto', 'package.json'));
  const bin = requireFromProto.resolve('@grpc/proto-loader/build/bin/proto-loader-gen-types.js');
  execFileSync(
    process.execPath,
    [
      bin,
      '--keepCase', '--longs=Number', '--enums=String', '--defaults', '--arrays', '--oneofs',
      '--grpcLib=@grpc/grpc-js', '--outDir', outDir, '--includeComments', protoFile,
    ],
    { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  process.stderr.write('proto: generated TypeScript types in proto/generated\n');
}
