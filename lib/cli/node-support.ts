/**
 * Node versions: the lab runs on Node 20 and later, recommends Node 22 LTS (Node 20 reached its end
 * of life in April 2026), and keeps the AWS SDK's 9-line notice about it from burying a command's
 * output.
 *
 * The notice comes from `emitWarningIfUnsupportedVersion` in @aws-sdk/core 3.981.2
 * (dist-cjs/submodules/client/index.js), which every client's runtime config calls when it is
 * constructed: below Node 22 it calls `process.emitWarning` once per process, unless
 * `AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED` is `"true"`. The lab sets that variable
 * before it builds a client and writes one line of its own on stderr instead.
 */

/** The SDK's switch for its Node version notice (only the exact value "true" counts). */
export const SDK_NODE_WARNING_ENV = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/** The Node major the lab recommends; also the first one the AWS SDK keeps supporting after January 2027. */
export const RECOMMENDED_NODE_MAJOR = 22;

/** The one-line notice for a Node version (`v20.20.2`), or undefined when it is recommended or newer. */
export function nodeVersionNote(version: string): string | undefined {
  const major = Number.parseInt(version.replace(/^v/, ''), 10);
  if (!Number.isInteger(major) || major >= RECOMMENDED_NODE_MAJOR) return undefined;
  return `note: Node ${version} is past its end of life; the AWS SDK for JavaScript requires Node >=${RECOMMENDED_NODE_MAJOR} from January 2027. Use Node ${RECOMMENDED_NODE_MAJOR} LTS (README: Node versions).`;
}

/**
 * Call before constructing an AWS SDK client: turns the SDK's notice off and writes the lab's
 * one line to stderr, once per process: the variable it sets is what a second call finds. A user who
 * turned the notice off gets no line either.
 */
export function quietSdkNodeWarning(
  env: NodeJS.ProcessEnv = process.env,
  version: string = process.version,
  writeErr: (text: string) => void = (text) => process.stderr.write(text),
): void {
  if (env[SDK_NODE_WARNING_ENV] === 'true') return;
  env[SDK_NODE_WARNING_ENV] = 'true';
  const note = nodeVersionNote(version);
  if (note) writeErr(`${note}\n`);
}
