// The operator docs must list every setting and every error type the code has.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_TYPES } from '@svc/shared';
import { controlPlaneSettings } from './config.js';

const docs = (name: string) => readFileSync(new URL(`../../docs/${name}`, import.meta.url), 'utf8');

describe('docs', () => {
  it('docs/configuration.md lists every control-plane setting with its default', () => {
    const text = docs('configuration.md');
    for (const [name, def] of Object.entries(controlPlaneSettings)) {
      expect(text, def.env).toContain(`| \`${def.env}\` | \`${name}\` | \`${JSON.stringify(def.default)}\` |`);
    }
  });

  it('docs/errors.md lists every error type with its status', () => {
    const text = docs('errors.md');
    for (const [type, def] of Object.entries(ERROR_TYPES)) {
      expect(text, type).toContain(`| ${def.status} | \`${type}\` |`);
    }
  });
});
