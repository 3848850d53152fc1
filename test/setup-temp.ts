import { afterAll } from 'vitest';
import { removeTempDirs } from './temp.ts';

// A vitest setup file (vitest.config.ts, setupFiles): run before each test file, so each file
// removes the folders its tests made with tempDir() once its last test is done.
afterAll(removeTempDirs);
