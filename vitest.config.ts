import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // CDK synthesis of a full stack takes seconds on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
