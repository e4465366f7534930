import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '@svc/shared';
import { loadCatalog } from '../models/catalog.js';
import { loadControlPlaneConfig, defaultControlPlaneConfig } from '../config.js';
import { parseReplicaEntry, resolveDesiredReplicas } from './desired.js';

const catalog = loadCatalog();

describe('desired replicas from configuration', () => {
  it('defaults (server config) to one replica of each tiny model in its cheapest variant, in pool na', () => {
    const config = loadControlPlaneConfig({});
    expect(resolveDesiredReplicas(config.replicas, catalog)).toEqual([
      { model: 'tiny-chat', quantization: 'int4', pool: 'na', count: 1 },
      { model: 'tiny-embed', quantization: 'int4', pool: 'na', count: 1 },
    ]);
  });

  it('is empty in the config tests build (defaultControlPlaneConfig), so harnesses start no replicas', () => {
    expect(resolveDesiredReplicas(defaultControlPlaneConfig().replicas, catalog)).toEqual([]);
  });

  it('parses the compact environment form, and "none"', () => {
    const config = loadControlPlaneConfig({ SVC_REPLICAS: 'tiny-chat:fp16:eu=2, llama-3.1-8b-instruct:int4:na=0' });
    expect(resolveDesiredReplicas(config.replicas, catalog)).toEqual([
      { model: 'tiny-chat', quantization: 'fp16', pool: 'eu', count: 2 },
      { model: 'llama-3.1-8b-instruct', quantization: 'int4', pool: 'na', count: 0 },
    ]);
    expect(resolveDesiredReplicas('none', catalog)).toEqual([]);
  });

  it('takes model ids that contain colons from the right', () => {
    expect(parseReplicaEntry('org:model:v2:fp8:apac=3')).toEqual({ model: 'org:model:v2', quantization: 'fp8', pool: 'apac', count: '3' });
  });

  it('accepts a list of objects from the config file', () => {
    expect(resolveDesiredReplicas([{ model: 'tiny-embed', quantization: 'fp8', pool: 'apac', count: 3 }], catalog)).toEqual([
      { model: 'tiny-embed', quantization: 'fp8', pool: 'apac', count: 3 },
    ]);
  });

  it.each([
    ['nope:int4:na=1', /SVC_REPLICAS \(replicas\): "nope:int4:na=1": unknown model "nope"; the catalog has .*tiny-chat/],
    ['qwen2.5-7b-instruct:fp8:na=1', /model qwen2.5-7b-instruct has no fp8 variant; it has fp16, int4/],
    ['tiny-chat:int4:mars=1', /unknown pool "mars"; pools are na, eu, apac/],
    ['tiny-chat:int4:na=lots', /count must be a whole number from 0 to 64/],
    ['tiny-chat:int4:na=65', /count must be a whole number from 0 to 64/],
    ['tiny-chat:int4=1', /"tiny-chat:int4=1" is not model:quantization:pool=count/],
    ['tiny-chat:int4:na=1,tiny-chat:int4:na=2', /tiny-chat:int4:na is listed twice/],
  ])('refuses %s at start-up with a message naming the setting', (value, message) => {
    const config = loadControlPlaneConfig({ SVC_REPLICAS: value });
    expect(() => resolveDesiredReplicas(config.replicas, catalog)).toThrow(ConfigError);
    expect(() => resolveDesiredReplicas(config.replicas, catalog)).toThrow(message);
  });

  it('reads the list form from the config file, and refuses a malformed one naming the setting', () => {
    const dir = mkdtempSync(join(tmpdir(), 'replicas-config-'));
    try {
      const file = join(dir, 'config.json');
      writeFileSync(file, JSON.stringify({ replicas: [{ model: 'tiny-chat', quantization: 'fp8', pool: 'eu', count: 2 }] }));
      expect(resolveDesiredReplicas(loadControlPlaneConfig({ SVC_CONFIG_FILE: file }).replicas, catalog)).toEqual([
        { model: 'tiny-chat', quantization: 'fp8', pool: 'eu', count: 2 },
      ]);
      writeFileSync(file, JSON.stringify({ replicas: [{ model: 'tiny-chat', quantization: 'fp4', pool: 'eu', count: 2 }] }));
      expect(() => loadControlPlaneConfig({ SVC_CONFIG_FILE: file })).toThrow(/invalid setting SVC_REPLICAS \(replicas, from config file/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
