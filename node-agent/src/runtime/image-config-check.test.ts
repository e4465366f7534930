import { describe, expect, it } from 'vitest';
import { MAX_IMAGE_VOLUMES, imageConfigProblem } from './image-config-check.js';

const volumes = (...paths: string[]) => ({ Volumes: Object.fromEntries(paths.map((p) => [p, {}])) });

describe('imageConfigProblem', () => {
  it.each([
    ['no volumes, no WORKDIR', {}],
    ['null volumes', { Volumes: null, WorkingDir: '' }],
    ['side by side volumes', volumes('/data', '/var/lib/postgresql/data', '/home/jovyan/work')],
    ['a prefix that is not a parent', volumes('/data', '/data2')],
    ['a working directory beside /proc', { WorkingDir: '/procedures' }],
    [`${MAX_IMAGE_VOLUMES} volumes`, volumes(...Array.from({ length: MAX_IMAGE_VOLUMES }, (_, i) => `/v${i}`))],
  ])('lets %s through', (_what, config) => expect(imageConfigProblem(config)).toBeNull());

  it.each([
    ['nested volumes', volumes('/usr', '/usr/lib', '/usr/lib/x86_64-linux-gnu'), 'the image declares the volume /usr/lib inside its volume /usr'],
    ['nested, written untidily', volumes('/a/', '/a//b/../b/c'), 'the image declares the volume /a/b/c inside its volume /a'],
    ['a volume at the root', volumes('/', '/data'), 'the image declares the volume /data inside its volume /'],
    ['too many volumes', volumes(...Array.from({ length: MAX_IMAGE_VOLUMES + 1 }, (_, i) => `/v${i}`)), `the image declares ${MAX_IMAGE_VOLUMES + 1} volumes`],
    ["runc's leaked descriptor", { WorkingDir: '/proc/self/fd/7' }, "the image's working directory /proc/self/fd/7 is under /proc"],
    ['/proc itself, written untidily', { WorkingDir: '/tmp/../proc/' }, "the image's working directory /tmp/../proc/ is under /proc"],
  ])('refuses %s', (_what, config, problem) => expect(imageConfigProblem(config)).toContain(problem));
});
