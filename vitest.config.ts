import { defineConfig } from 'vitest/config';
import E2eFirstSequencer from './test/support/e2e-first-sequencer.js';

export default defineConfig({
  test: {
    include: ['{shared,proto,control-plane,node-agent,cpu-engine,test,scripts}/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // Two files at a time: most e2e files wait on Docker, SSH or a partition window, so
    // two overlap well on two cores (three made the Docker suites contend).
    maxWorkers: 2,
    // The watchdog ends a run whose test file hangs past every timeout, saying where.
    reporters: ['default', './test/support/watchdog-reporter.ts'],
    sequence: { sequencer: E2eFirstSequencer },
  },
});
