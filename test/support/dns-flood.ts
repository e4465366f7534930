// Builds dns-flood.c (a tenant flooding Docker's embedded DNS server) statically, so it runs
// in any test image, once per version of the source.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileOnce } from 'node-nvml-bindings';

const here = fileURLToPath(new URL('.', import.meta.url));

export function buildDnsFlood(): Promise<string> {
  return compileOnce({
    source: join(here, 'dns-flood.c'),
    flags: ['-static', '-O2', '-Wall'],
    output: (hash) => join(here, '..', '..', 'node_modules', '.cache', 'dns-flood', `dns-flood-${hash}`),
    what: 'the DNS flood test program',
    hint: "it needs a C compiler and a static libc: Debian's build-essential",
    mode: 0o755,
  });
}
