import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/sequencer.ts';

/**
 * Node's syntax detection off in the workers, where the running Node offers the switch. vitest
 * imports the dependencies it leaves to Node through Node's ESM loader, which since Node 20.19
 * parses each `.js` file it loads from a package without a "type" (the entry files of aws-cdk-lib,
 * the AWS SDK clients' multi-megabyte bundles) for ESM syntax before the CommonJS loader compiles
 * it again (docs/facts.md §7 point 7). Off, such a file is CommonJS at once, as on every Node 20
 * before 20.19 (package.json's engines: >= 20): about 1 s less CPU per worker (docs/testing.md).
 */
const noSyntaxDetection = process.allowedNodeEnvironmentFlags.has('--no-experimental-detect-module')
  ? ['--no-experimental-detect-module']
  : [];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // A temporary folder per run, removed at its end (npm test leaves nothing behind).
    globalSetup: ['test/global-temp.ts'],
    // Run before every test file (also on a warm worker): removes the folders its tests made.
    setupFiles: ['test/setup-temp.ts'],
    // Child processes, not worker threads: tests spawn shells and the CLI, and a crashed native
    // child (Chromium) cannot take the runner down with it.
    pool: 'forks',
    execArgv: noSyntaxDetection,
    // One worker per core, all of them: vitest's default keeps one core free, which on a 2-core
    // machine means one worker and the whole suite in one line.
    maxWorkers: Math.max(2, availableParallelism()),
    // Test files of a worker share its modules. Loading aws-cdk-lib, zod and the lab, and the
    // first CDK synthesis of a process, cost more CPU than most files' tests; isolated, every file
    // paid them again. Shared modules also let aws-cdk-lib's asset cache bundle each Lambda handler
    // once per worker (test/aws/app.ts). The price: a test must not leave global state behind (a
    // mocked SDK client is mocked afresh in beforeEach, environment is passed in, not set on
    // process.env). docs/testing.md has the rules and how to find the slowest files.
    isolate: false,
    // The longest files first (measured seconds, test/file-weights.json), so the last file a
    // worker takes is a short one: on a fresh clone vitest has no previous run to order by and
    // took the files largest first, which left a long file running alone on one core at the end.
    sequence: { sequencer: LongestFirst },
    // CDK synthesis of a full stack takes seconds on a 2-core machine, and a worker's first one
    // about ten seconds of CPU (later ones about one): minutes on a machine shared with others.
    // A shell-sandbox test that runs the bootstrap twice took 167 s of wall time for about 15 s of
    // CPU at a load average of 25 on 2 cores. The timeout is there to end a hang, which the
    // sandbox's own bound (test/aws/bootstrap/sandbox.ts) and the bootstrap's step budgets end first.
    testTimeout: 600_000,
    hookTimeout: 600_000,
  },
});
