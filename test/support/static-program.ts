// Builds a tenant's program from test/support/<name>.c statically, so it runs in any test
// image, once per version of its source.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileOnce } from 'node-nvml-bindings';

const here = fileURLToPath(new URL('.', import.meta.url));

const PROGRAMS = {
  'dns-flood': "a tenant flooding Docker's embedded DNS server",
  'pty-hog': 'a tenant opening every pseudo-terminal it can',
  'kernel-counts': "a tenant adding to the kernel's per-user counts of epoll and inotify watches",
  'tcp-hog': 'a tenant queueing data in TCP sockets it never reads',
  'udp-hog': 'a tenant holding datagrams in UDP sockets it never reads',
  'pipe-hog': 'a tenant taking pipe buffers, which the kernel counts per user',
  'subnet-sweep': 'a tenant connecting to every address of its own subnet',
  'io-uring-hog': 'a tenant pinning memory through io_uring, which the kernel counts per user',
  'rt-signal-hog': 'a tenant queueing real-time signals and message queues, which the kernel counts per user',
  'conntrack-fill': "a tenant starting flows in its own namespace, each an entry of the kernel's connection table",
  pause: 'the only program of an image without a shell',
} as const;

export function buildStaticProgram(name: keyof typeof PROGRAMS): Promise<string> {
  return compileOnce({
    source: join(here, `${name}.c`),
    flags: ['-static', '-O2', '-Wall'],
    output: (hash) => join(here, '..', '..', 'node_modules', '.cache', name, `${name}-${hash}`),
    what: `the test program ${name} (${PROGRAMS[name]})`,
    hint: "it needs a C compiler and a static libc: Debian's build-essential",
    mode: 0o755,
  });
}
