import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['{shared,proto,control-plane,node-agent,cpu-engine,test,scripts}/**/*.test.ts'],
    exclude: ['**/node_modules/**'],
    testTimeout: 30_000,
    hookTimeout: 180_000,
    pool: 'forks',
  },
});
