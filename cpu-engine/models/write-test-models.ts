// Writes the project's tiny test models into a folder:
//   npx tsx cpu-engine/models/write-test-models.ts <outdir>
// tiny-chat-{f16,q8_0,q4_0}.gguf and tiny-embed-{f16,q8_0,q4_0}.gguf, byte-identical on every run.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { writeGguf, type GgufModel } from './gguf-writer.js';
import { tinyChatModel } from './tiny-chat.js';
import { tinyEmbedModel } from './tiny-embed.js';

/** File suffix -> weight type: fp16, fp8 and int4 of the service map to these. */
export const QUANTIZATIONS = { f16: 'F16', q8_0: 'Q8_0', q4_0: 'Q4_0' } as const;

export function testModelFiles(): Array<{ file: string; model: () => GgufModel }> {
  const files: Array<{ file: string; model: () => GgufModel }> = [];
  for (const [suffix, type] of Object.entries(QUANTIZATIONS)) {
    files.push({ file: `tiny-chat-${suffix}.gguf`, model: () => tinyChatModel(type) });
    files.push({ file: `tiny-embed-${suffix}.gguf`, model: () => tinyEmbedModel(type) });
  }
  return files;
}

export function writeTestModels(outDir: string): string[] {
  mkdirSync(outDir, { recursive: true });
  return testModelFiles().map(({ file, model }) => {
    const path = join(outDir, file);
    writeFileSync(path, writeGguf(model()));
    return path;
  });
}

const invokedAsScript = process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename);
if (invokedAsScript) {
  const outDir = process.argv[2];
  if (!outDir || process.argv.length > 3) {
    process.stderr.write('usage: write-test-models.ts <outdir>\n');
    process.exit(2);
  }
  for (const path of writeTestModels(outDir)) process.stdout.write(`${path}\n`);
}
