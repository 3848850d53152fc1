import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // A temporary folder per run, removed at its end (npm test leaves nothing behind).
    globalSetup: ['test/global-temp.ts'],
    // CDK synthesis of a full stack takes seconds on a 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
