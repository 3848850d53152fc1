/**
 * The process side every probe's `main` shares: parse the settings, run, print ONE JSON line on
 * stdout and exit 0; or print `<probe>: <message>` on stderr and exit 1. Logs go to stderr so
 * stdout stays one parseable document.
 */
import { type FlagSpecs, type FlagValues, parseFlags } from './flags.ts';

export function runProbe<S extends FlagSpecs>(
  probe: string,
  specs: S,
  body: (settings: FlagValues<S>) => Promise<object>,
): void {
  const fail = (error: unknown) => {
    process.stderr.write(`${probe}: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  };
  let settings: FlagValues<S>;
  try {
    settings = parseFlags(specs, process.argv.slice(2), process.env);
  } catch (error) {
    fail(error);
    return;
  }
  // Through a promise so that a synchronous throw in the body is reported the same way.
  Promise.resolve(settings)
    .then(body)
    .then((result) => {
      // Exit only once the line is flushed: stdout may be a pipe read by the study runner.
      process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
    }, fail);
}

/** One line for people watching the pod's log; never on stdout. */
export function logLine(probe: string, line: string): void {
  process.stderr.write(`${probe}: ${line}\n`);
}
