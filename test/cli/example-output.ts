/** How exampleOutput runs its action. */
export interface ExampleOutputOptions {
  /** Keep standard error too, interleaved with standard output as written (by default it is dropped). */
  readonly stderr?: boolean;
  /** The working folder meanwhile (a page's example names its files from the checkout). */
  readonly cwd?: string;
}

/**
 * What `action` writes to standard output (with `stderr`, to both, in the order written), with
 * LAB_CONFIG unset meanwhile (a page's example names its configuration itself). Free of vitest:
 * the docs examples run it from scripts/ (npm run docs:examples, scripts/examples.ts's
 * runLabCaptured) as well as from their tests.
 */
export async function exampleOutput<T>(
  action: () => Promise<T>,
  options: ExampleOutputOptions = {},
): Promise<{ value: T; stdout: string }> {
  const saved = {
    out: process.stdout.write,
    err: process.stderr.write,
    config: process.env.LAB_CONFIG,
    cwd: process.cwd(),
  };
  let stdout = '';
  const capture = ((chunk: string | Uint8Array) => {
    stdout += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    return true;
  }) as typeof process.stdout.write;
  delete process.env.LAB_CONFIG;
  if (options.cwd !== undefined) process.chdir(options.cwd);
  process.stdout.write = capture;
  process.stderr.write = options.stderr ? capture : ((() => true) as typeof process.stderr.write);
  try {
    return { value: await action(), stdout };
  } finally {
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
    process.chdir(saved.cwd);
    if (saved.config !== undefined) process.env.LAB_CONFIG = saved.config;
  }
}
