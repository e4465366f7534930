import { describe, expect, it } from 'vitest';
import { dnsLimitRules } from './task-dns-limit.js';

describe('dnsLimitRules', () => {
  it.each([
    [100, '100/second', '200', '7kb/second', '13kb'],
    [1, '1/second', '2', '1kb/second', '1kb'],
    [10_000, '10000/second', '20000', '625kb/second', '1250kb'],
  ])('%i queries a second: UDP in packets, TCP in bytes, a burst of twice the rate', (qps, udpRate, udpBurst, tcpRate, tcpBurst) => {
    expect(dnsLimitRules(qps)).toEqual([
      `-A OUTPUT -d 127.0.0.11/32 -p udp -m hashlimit --hashlimit-name svc-dns-udp --hashlimit-above ${udpRate} --hashlimit-burst ${udpBurst} -j DROP`,
      `-A OUTPUT -d 127.0.0.11/32 -p tcp -m hashlimit --hashlimit-name svc-dns-tcp --hashlimit-above ${tcpRate} --hashlimit-burst ${tcpBurst} -j DROP`,
    ]);
  });

});
