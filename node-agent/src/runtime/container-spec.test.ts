import { describe, expect, it } from 'vitest';
import { LABEL_INSTANCE, LABEL_NODE, LABEL_SPEC, LABEL_SSH_KEYS, buildContainerSpec, taskFromLabels, taskSpecFromLabels, type TaskSpec } from './container-spec.js';

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
    const spec = buildContainerSpec(task, { nodeId: 'node_1', nvidiaRuntime: false });
    expect(spec.Labels).toEqual({
      [LABEL_INSTANCE]: 'inst_abc',
      [LABEL_NODE]: 'node_1',
      'svc.label.team': 'ml',
      'svc.label.svc.instance': 'spoof',
    });
    expect(spec.name).toBe('svc-instance-inst_abc');
  });

  it('keeps the authorized SSH keys in a label, one per line, so a restarted agent finds them', () => {
    const keys = ['ssh-ed25519 AAAAC3Nza a@b', 'ssh-rsa AAAAB3Nza c@d'];
    expect(buildContainerSpec({ ...task, sshAuthorizedKeys: keys }, { nodeId: 'n', nvidiaRuntime: false }).Labels?.[LABEL_SSH_KEYS]).toBe(keys.join('\n'));
    expect(buildContainerSpec(task, { nodeId: 'n', nvidiaRuntime: false }).Labels?.[LABEL_SSH_KEYS]).toBeUndefined();
  });

  it('requests GPUs by UUID only when the NVIDIA runtime is present', () => {
    const gpu = buildContainerSpec(task, { nodeId: 'n', nvidiaRuntime: true });
    expect(gpu.HostConfig?.DeviceRequests).toEqual([{ Driver: 'nvidia', DeviceIDs: ['GPU-1', 'GPU-2'], Capabilities: [['gpu']] }]);
    expect(gpu.Env).toContain('NVIDIA_VISIBLE_DEVICES=GPU-1,GPU-2');
    const dev = buildContainerSpec(task, { nodeId: 'n', nvidiaRuntime: false });
    expect(dev.HostConfig?.DeviceRequests).toBeUndefined();
    expect(dev.Env).toContain('SVC_GPU_UUIDS=GPU-1,GPU-2');
  });

  it('is never privileged and never mounts the Docker socket', () => {
    for (const nvidiaRuntime of [true, false]) {
      const spec = buildContainerSpec(task, { nodeId: 'n', nvidiaRuntime });
      expect(spec.HostConfig?.Privileged).toBe(false);
      expect(spec.HostConfig?.SecurityOpt).toContain('no-new-privileges');
      expect(JSON.stringify(spec)).not.toContain('docker.sock');
    }
  });
});

describe('taskFromLabels', () => {
  it('reads back the task that buildContainerSpec labelled, ignoring spoofed user labels', () => {
    expect(taskFromLabels(buildContainerSpec(task, { nodeId: 'n', nvidiaRuntime: false }).Labels)).toEqual({
      kind: 'instance',
      taskId: 'inst_abc',
    });
    const replica = buildContainerSpec({ ...task, kind: 'replica', taskId: 'rep_1', labels: {} }, { nodeId: 'n', nvidiaRuntime: false });
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
    const spec = buildContainerSpec(replica, { nodeId: 'n', nvidiaRuntime: false });
    expect(spec.ExposedPorts).toEqual({ '8000/tcp': {} });
    expect(spec.HostConfig?.PortBindings).toEqual({ '8000/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] });
    expect(spec.HostConfig?.RestartPolicy).toEqual({ Name: 'no' });
    expect(spec.Cmd).toEqual(['--model', 'm']);
    expect(taskSpecFromLabels(spec.Labels)).toEqual(replica);
    expect(taskSpecFromLabels({ ...spec.Labels, [LABEL_SPEC]: '{not json' })).toBeNull();
    expect(buildContainerSpec(task, { nodeId: 'n', nvidiaRuntime: false }).ExposedPorts).toBeUndefined();
    expect(buildContainerSpec(task, { nodeId: 'n', nvidiaRuntime: false }).Labels![LABEL_SPEC]).toBeUndefined();
  });
});
