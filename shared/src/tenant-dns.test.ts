import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hostsFileAddresses, resolveTenantName } from './tenant-dns.js';

const HOSTS = `# a hosts file
127.0.0.1\tlocalhost
::1     localhost ip6-localhost   # both families
10.0.0.5 mirror.internal Mirror
not-an-address something
`;

describe('hostsFileAddresses', () => {
  it.each([
    ['localhost', [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }]],
    ['MIRROR', [{ address: '10.0.0.5', family: 4 }]],
    ['ip6-localhost', [{ address: '::1', family: 6 }]],
    ['something', []],
    ['registry.example.com', []],
  ])('%s', (host, addresses) => {
    expect(hostsFileAddresses(HOSTS, host)).toEqual(addresses);
  });
});

describe('resolveTenantName', () => {
  it("answers a name in the hosts file from it, which DNS would not know", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'hosts-')), 'hosts');
    writeFileSync(file, HOSTS);
    expect(await resolveTenantName('mirror.internal', file)).toEqual([{ address: '10.0.0.5', family: 4 }]);
  });
});
