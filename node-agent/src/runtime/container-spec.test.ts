import { describe, expect, it } from 'vitest';
import { KEPT_CAPABILITIES, LABEL_DISK_LIMIT, LABEL_NETWORK_LIMIT, LABEL_INSTANCE, LABEL_NODE, LABEL_SPEC, LABEL_SSH_KEYS, SETTING_LABELS, buildContainerSpec, taskFromLabels, taskSpecFromLabels, type HostCapabilities, type TaskSpec } from './container-spec.js';
import { GIB } from './task-limits.js';

const host = (nodeId: string, nvidiaRuntime: boolean): HostCapabilities => ({
  nodeId,
  nvidiaRuntime,
  capacity: { cpus: 2, memoryBytes: 24 * GIB },
  limits: { reservedCpus: 1, reservedMemoryBytes: 2 * GIB, pidsLimit: 4096, defaultDiskBytes: 50 * GIB, defaultNetworkMbps: 1000, diskMBpsPerGpu: 500, diskIopsPerGpu: 20_000 },
});

const task: TaskSpec = {
  taskId: 'inst_abc',
  kind: 'instance',
  image: '127.0.0.1:5000/svc/busybox:1',
  gpuUuids: ['GPU-1', 'GPU-2'],
  env: { FOO: 'bar' },
  labels: { team: 'ml', 'svc.instance': 'spoof' },
};

describe('buildContainerSpec', () => {
  it('labels the container with its task and node, user labels under a prefix', () => {
    const spec = buildContainerSpec(task, host('node_1', false));
    expect(spec.Labels).toEqual({
      [LABEL_INSTANCE]: 'inst_abc',
      [LABEL_NODE]: 'node_1',
      [LABEL_DISK_LIMIT]: String(50 * GIB),
      [LABEL_NETWORK_LIMIT]: '1000',
      [LABEL_SPEC]: '',
      [LABEL_SSH_KEYS]: '',
      'svc.label.team': 'ml',
      'svc.label.svc.instance': 'spoof',
    });
    expect(spec.name).toBe('svc-instance-inst_abc');
  });

  it('keeps the authorized SSH keys in a label, one per line, so a restarted agent finds them', () => {
    const keys = ['ssh-ed25519 AAAAC3Nza a@b', 'ssh-rsa AAAAB3Nza c@d'];
    expect(buildContainerSpec({ ...task, sshAuthorizedKeys: keys }, host('n', false)).Labels?.[LABEL_SSH_KEYS]).toBe(keys.join('\n'));
    expect(buildContainerSpec(task, host('n', false)).Labels?.[LABEL_SSH_KEYS]).toBe('');
  });

  it('requests GPUs by UUID only when the NVIDIA runtime is present', () => {
    const gpu = buildContainerSpec(task, host('n', true));
    expect(gpu.HostConfig?.DeviceRequests).toEqual([{ Driver: 'nvidia', DeviceIDs: ['GPU-1', 'GPU-2'], Capabilities: [['gpu']] }]);
    expect(gpu.Env).toContain('NVIDIA_VISIBLE_DEVICES=GPU-1,GPU-2');
    const dev = buildContainerSpec(task, host('n', false));
    expect(dev.HostConfig?.DeviceRequests).toBeUndefined();
    expect(dev.Env).toContain('SVC_GPU_UUIDS=GPU-1,GPU-2');
  });

  it("writes every label it reads a task's settings back from, empty when the task has none, so an image's own labels (Docker merges them in) stand for none", () => {
    for (const kind of ['instance', 'replica'] as const) {
      const labels = buildContainerSpec({ ...task, kind }, host('n', false)).Labels!;
      for (const key of SETTING_LABELS) expect({ kind, key, written: key in labels }).toEqual({ kind, key, written: true });
    }
  });

  it("turns off, over an instance's image, what the NVIDIA runtime would give it of the host's shared devices; a replica's image is the provider's", () => {
    const instance = buildContainerSpec(task, host('n', true));
    expect(instance.Env).toEqual(expect.arrayContaining(['NVIDIA_MOFED=disabled', 'NVIDIA_NVSWITCH=disabled', 'NVIDIA_GDS=disabled', 'NVIDIA_GDRCOPY=disabled', 'NVIDIA_IMEX_CHANNELS=void']));
    const replica = buildContainerSpec({ ...task, kind: 'replica' }, host('n', true));
    expect(replica.Env?.filter((e) => /^NVIDIA_(MOFED|NVSWITCH|GDS|GDRCOPY|IMEX_CHANNELS)=/.test(e))).toEqual([]);
  });

  it('gives a task no GPU it was not given, whatever its image says (CUDA images set NVIDIA_VISIBLE_DEVICES=all)', () => {
    for (const [name, spec] of [
      ['no NVIDIA runtime', buildContainerSpec(task, host('n', false))],
      ['no GPU', buildContainerSpec({ ...task, kind: 'replica', gpuUuids: [] }, host('n', true))],
    ] as const) {
      expect({ name, env: spec.Env?.filter((e) => e.startsWith('NVIDIA_VISIBLE_DEVICES=')) }).toEqual({ name, env: ['NVIDIA_VISIBLE_DEVICES=void'] });
    }
  });

  it("turns off the image's HEALTHCHECK, which Docker would run as often as the image says, on the host's CPU", () => {
    for (const kind of ['instance', 'replica'] as const) expect(buildContainerSpec({ ...task, kind }, host('n', true)).Healthcheck).toEqual({ Test: ['NONE'] });
  });

  it('is never privileged and never mounts the Docker socket', () => {
    for (const nvidiaRuntime of [true, false]) {
      const spec = buildContainerSpec(task, host('n', nvidiaRuntime));
      expect(spec.HostConfig?.Privileged).toBe(false);
      expect(spec.HostConfig?.SecurityOpt).toContain('no-new-privileges');
      expect(JSON.stringify(spec)).not.toContain('docker.sock');
    }
  });
});

describe('buildContainerSpec for hostile tenants', () => {
  const gpuHost: HostCapabilities = { ...host('n', true), capacity: { cpus: 224, memoryBytes: 2048 * GIB } };

  it('puts the task alone on its own network, never the default bridge', () => {
    expect(buildContainerSpec(task, host('n', false)).HostConfig?.NetworkMode).toBe('svc-net-instance-inst_abc');
    expect(buildContainerSpec({ ...task, kind: 'replica', taskId: 'rep_1' }, host('n', false)).HostConfig?.NetworkMode).toBe('svc-net-replica-rep_1');
  });

  it('applies the limits asked for on a big host, with no swap and a pids limit', () => {
    const hc = buildContainerSpec({ ...task, resources: { nanoCpus: 52e9, memoryBytes: 450 * GIB, shmBytes: 64 * GIB } }, gpuHost).HostConfig!;
    expect({ NanoCpus: hc.NanoCpus, Memory: hc.Memory, MemorySwap: hc.MemorySwap, ShmSize: hc.ShmSize, PidsLimit: hc.PidsLimit }).toEqual({
      NanoCpus: 52e9,
      Memory: 450 * GIB,
      MemorySwap: 450 * GIB,
      ShmSize: 64 * GIB,
      PidsLimit: 4096,
    });
  });

  it("gives containers the host-wide per-user limits (queued signals, message queues) the host allows, an instance a bounded one otherwise", () => {
    const bounded = buildContainerSpec(task, host('n', false)).HostConfig!.Ulimits;
    expect(bounded).toEqual([{ Name: 'sigpending', Soft: 1024, Hard: 1024 }, { Name: 'msgqueue', Soft: 81920, Hard: 81920 }]);
    expect(buildContainerSpec({ ...task, kind: 'replica', taskId: 'rep_1' }, host('n', false)).HostConfig!.Ulimits).toBeUndefined();
    const open = { ...host('n', false), unlimitedRlimits: new Set(['sigpending', 'msgqueue', 'memlock'] as const) };
    expect(buildContainerSpec(task, open).HostConfig!.Ulimits?.map((u) => [u.Name, u.Hard])).toEqual([['sigpending', -1], ['msgqueue', -1], ['memlock', -1]]);
  });

  it('clamps them to a small host (a dev machine still runs the instance)', () => {
    const hc = buildContainerSpec({ ...task, resources: { nanoCpus: 52e9, memoryBytes: 450 * GIB, shmBytes: 64 * GIB } }, host('n', false)).HostConfig!;
    expect({ NanoCpus: hc.NanoCpus, Memory: hc.Memory, ShmSize: hc.ShmSize }).toEqual({ NanoCpus: 1e9, Memory: 22 * GIB, ShmSize: 22 * GIB });
  });

  it("throttles an instance's reads and writes on the disk holding Docker's data, by its GPUs; a replica, or a host whose disk is unknown, not", () => {
    const disk = { path: '/dev/nvme0n1', major: 259, minor: 0 };
    const throttle = (hc: NonNullable<ReturnType<typeof buildContainerSpec>['HostConfig']>) => ({
      read: hc.BlkioDeviceReadBps,
      write: hc.BlkioDeviceWriteBps,
      readOps: hc.BlkioDeviceReadIOps,
      writeOps: hc.BlkioDeviceWriteIOps,
    });
    // Two GPUs: two shares of 500 MB/s and 20,000 operations a second.
    expect(throttle(buildContainerSpec(task, { ...gpuHost, disk }).HostConfig!)).toEqual({
      read: [{ Path: '/dev/nvme0n1', Rate: 1_000_000_000 }],
      write: [{ Path: '/dev/nvme0n1', Rate: 1_000_000_000 }],
      readOps: [{ Path: '/dev/nvme0n1', Rate: 40_000 }],
      writeOps: [{ Path: '/dev/nvme0n1', Rate: 40_000 }],
    });
    const none = { read: undefined, write: undefined, readOps: undefined, writeOps: undefined };
    expect(throttle(buildContainerSpec({ ...task, kind: 'replica' }, { ...gpuHost, disk }).HostConfig!)).toEqual(none);
    expect(throttle(buildContainerSpec(task, gpuHost).HostConfig!)).toEqual(none);
  });

  it("puts an instance under /docker where the agent limits its sockets itself (cgroup v1), so it knows the cgroup's path; a replica, or a v2 host, as Docker decides", () => {
    expect(buildContainerSpec(task, { ...gpuHost, socketLimits: true }).HostConfig!.CgroupParent).toBe('/docker');
    expect(buildContainerSpec({ ...task, kind: 'replica' }, { ...gpuHost, socketLimits: true }).HostConfig!.CgroupParent).toBeUndefined();
    expect(buildContainerSpec(task, gpuHost).HostConfig!.CgroupParent).toBeUndefined();
  });

  it('drops every capability but the few a GPU workload uses: no NET_RAW, MKNOD, SYS_CHROOT or NET_ADMIN', () => {
    const hc = buildContainerSpec(task, host('n', false)).HostConfig!;
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd).toEqual([...KEPT_CAPABILITIES]);
    for (const cap of ['NET_RAW', 'NET_ADMIN', 'MKNOD', 'SYS_CHROOT', 'SYS_ADMIN', 'SETFCAP', 'AUDIT_WRITE']) expect(hc.CapAdd).not.toContain(cap);
  });

  it('keeps an instance\'s disk limit in a label, for the disk watch of a restarted agent', () => {
    expect(buildContainerSpec({ ...task, resources: { diskBytes: 80 * GIB } }, gpuHost).Labels?.[LABEL_DISK_LIMIT]).toBe(String(80 * GIB));
    expect(buildContainerSpec({ ...task, kind: 'replica' }, gpuHost).Labels?.[LABEL_DISK_LIMIT]).toBe('');
  });

  it("keeps an instance's bandwidth in a label, for the SSH gateway of a restarted agent; a replica has none", () => {
    expect(buildContainerSpec({ ...task, resources: { networkMbps: 20_000 } }, gpuHost).Labels?.[LABEL_NETWORK_LIMIT]).toBe('20000');
    expect(buildContainerSpec({ ...task, kind: 'replica', resources: { networkMbps: 20_000 } }, gpuHost).Labels?.[LABEL_NETWORK_LIMIT]).toBe('');
  });

  it('rotates the container\'s log, which Docker otherwise keeps without end on the host', () => {
    for (const kind of ['instance', 'replica'] as const) {
      expect(buildContainerSpec({ ...task, kind }, host('n', false)).HostConfig?.LogConfig).toEqual({ Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } });
    }
  });

  it("runs an instance's command behind the log limiter, mounted read-only, exactly as Docker would have run it", () => {
    const limited: HostCapabilities = { ...host('n', false), logLimit: { path: '/var/lib/svc-agent/bin/svc-log-init-abc', bytesPerSecond: 1000, linesPerSecond: 10 } };
    const init = ['/.svc/log-init', '1000', '10', '--'];
    const mounts = [{ Type: 'bind', Source: '/var/lib/svc-agent/bin/svc-log-init-abc', Target: '/.svc/log-init', ReadOnly: true }];
    const table: Array<[string, { entrypoint: string[]; cmd: string[] }, string[] | undefined, { Entrypoint?: string[]; Cmd?: string[] }]> = [
      ['image CMD only', { entrypoint: [], cmd: ['sh', '-c', 'train'] }, undefined, { Entrypoint: init, Cmd: ['sh', '-c', 'train'] }],
      ['image ENTRYPOINT and CMD', { entrypoint: ['/start.sh'], cmd: ['--port', '1'] }, undefined, { Entrypoint: [...init, '/start.sh'], Cmd: ['--port', '1'] }],
      ["the order's command replaces CMD, not ENTRYPOINT", { entrypoint: ['/start.sh'], cmd: ['--port', '1'] }, ['--port', '2'], { Entrypoint: [...init, '/start.sh'], Cmd: ['--port', '2'] }],
      ['ENTRYPOINT only', { entrypoint: ['/start.sh'], cmd: [] }, undefined, { Entrypoint: [...init, '/start.sh'], Cmd: [] }],
    ];
    for (const [name, image, command, expected] of table) {
      const spec = buildContainerSpec({ ...task, ...(command ? { command } : {}) }, limited, image);
      expect({ Entrypoint: spec.Entrypoint, Cmd: spec.Cmd }, name).toEqual(expected);
      expect(spec.HostConfig?.Mounts, name).toEqual(mounts);
    }
    // Nothing to run: no limiter, so Docker refuses the create with its own message.
    const empty = buildContainerSpec(task, limited, { entrypoint: [], cmd: [] });
    expect([empty.Entrypoint, empty.HostConfig?.Mounts]).toEqual([undefined, undefined]);
    // A replica (the provider's model server) and a host without the limiter run the command as is.
    const plain: Array<[TaskSpec, HostCapabilities]> = [[{ ...task, kind: 'replica', command: ['serve'] }, limited], [{ ...task, command: ['serve'] }, host('n', false)]];
    for (const [spec, hostCaps] of plain) {
      const built = buildContainerSpec(spec, hostCaps, { entrypoint: ['/e'], cmd: ['c'] });
      expect([built.Entrypoint, built.Cmd, built.HostConfig?.Mounts]).toEqual([undefined, ['serve'], undefined]);
    }
  });

  it("binds an instance's own capped devpts over /dev/pts, beside the log limiter; a replica keeps Docker's", () => {
    const withPts: HostCapabilities = { ...host('n', false), pts: { root: '/var/lib/svc-agent/pts', max: 1024 } };
    const own = { Type: 'bind', Source: '/var/lib/svc-agent/pts/svc-instance-inst_abc', Target: '/dev/pts' };
    expect(buildContainerSpec(task, withPts).HostConfig?.Mounts).toEqual([own]);
    const both = buildContainerSpec(task, { ...withPts, logLimit: { path: '/bin/svc-log-init', bytesPerSecond: 1, linesPerSecond: 1 } }, { entrypoint: [], cmd: ['sh'] });
    expect(both.HostConfig?.Mounts).toEqual([{ Type: 'bind', Source: '/bin/svc-log-init', Target: '/.svc/log-init', ReadOnly: true }, own]);
    expect(buildContainerSpec({ ...task, kind: 'replica' }, withPts).HostConfig?.Mounts).toBeUndefined();
  });

  it('makes tenants, instances first, what the OOM killer takes before the agent, and turns IPv6 off inside', () => {
    expect(buildContainerSpec(task, host('n', false)).HostConfig?.OomScoreAdj).toBe(800);
    expect(buildContainerSpec({ ...task, kind: 'replica' }, host('n', false)).HostConfig?.OomScoreAdj).toBe(500);
    expect(buildContainerSpec(task, host('n', false)).HostConfig?.Sysctls).toEqual({ 'net.ipv6.conf.all.disable_ipv6': '1' });
  });
});

describe('taskFromLabels', () => {
  it('reads back the task that buildContainerSpec labelled, ignoring spoofed user labels', () => {
    expect(taskFromLabels(buildContainerSpec(task, host('n', false)).Labels)).toEqual({
      kind: 'instance',
      taskId: 'inst_abc',
    });
    const replica = buildContainerSpec({ ...task, kind: 'replica', taskId: 'rep_1', labels: {} }, host('n', false));
    expect(taskFromLabels(replica.Labels)).toEqual({ kind: 'replica', taskId: 'rep_1' });
    expect(taskFromLabels({ [LABEL_NODE]: 'n', 'svc.label.svc.instance': 'spoof' })).toBeNull();
    expect(taskFromLabels(undefined)).toBeNull();
  });

  it('publishes a replica port on the given address with a port Docker picks, and keeps its spec in a label', () => {
    const replica: TaskSpec = {
      taskId: 'rep_1',
      kind: 'replica',
      image: 'vllm/vllm-openai:v0.11.0',
      gpuUuids: ['GPU-1'],
      command: ['--model', 'm'],
      publish: { containerPort: 8000, hostIp: '127.0.0.1' },
      healthPath: '/health',
    };
    const spec = buildContainerSpec(replica, host('n', false));
    expect(spec.ExposedPorts).toEqual({ '8000/tcp': {} });
    expect(spec.HostConfig?.PortBindings).toEqual({ '8000/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] });
    expect(spec.HostConfig?.RestartPolicy).toEqual({ Name: 'no' });
    expect(spec.Cmd).toEqual(['--model', 'm']);
    expect(taskSpecFromLabels(spec.Labels)).toEqual(replica);
    expect(taskSpecFromLabels({ ...spec.Labels, [LABEL_SPEC]: '{not json' })).toBeNull();
    expect(buildContainerSpec(task, host('n', false)).ExposedPorts).toBeUndefined();
    expect(buildContainerSpec(task, host('n', false)).Labels![LABEL_SPEC]).toBe('');
  });
});
