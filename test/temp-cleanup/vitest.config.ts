import { defineConfig } from 'vitest/config';

// The suite's settings that decide when tempDir()'s folders are removed (vitest.config.ts): one
// worker, shared modules, the same setup file; two files, so the second runs on a warm worker.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/temp-cleanup/*.fixture.ts'],
    setupFiles: ['test/setup-temp.ts'],
    pool: 'forks',
    maxWorkers: 1,
    isolate: false,
    sequence: { shuffle: false },
    // As the suite's (vitest.config.ts): a loaded machine must not fail the fixtures on time.
    testTimeout: 600_000,
    hookTimeout: 600_000,
  },
});
