// docs/node-agent.md must list every agent setting with its default.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { agentSettings } from './agent-config.js';

describe('docs/node-agent.md', () => {
  it('lists every agent setting with its default', () => {
    const text = readFileSync(new URL('../../../docs/node-agent.md', import.meta.url), 'utf8');
    for (const [name, def] of Object.entries(agentSettings)) {
      expect(text, def.env).toContain(`| \`${def.env}\` | \`${name}\` | \`${JSON.stringify(def.default)}\` |`);
    }
  });
});
