/**
 * What `action` writes to standard output, with standard error dropped and LAB_CONFIG unset
 * meanwhile (a page's example names its configuration itself). Free of vitest: the docs examples
 * run it from scripts/ (npm run docs:examples) as well as from their tests.
 */
export async function exampleOutput<T>(action: () => Promise<T>): Promise<{ value: T; stdout: string }> {
  const saved = { out: process.stdout.write, err: process.stderr.write, config: process.env.LAB_CONFIG };
  let stdout = '';
  process.stdout.write = ((chunk: unknown) => {
    stdout += String(chunk);
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = (() => true) as typeof process.stderr.write;
  delete process.env.LAB_CONFIG;
  try {
    return { value: await action(), stdout };
  } finally {
    process.stdout.write = saved.out;
    process.stderr.write = saved.err;
    if (saved.config !== undefined) process.env.LAB_CONFIG = saved.config;
  }
}
